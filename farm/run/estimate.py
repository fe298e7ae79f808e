"""Durations an earlier sweep measured, read from MLflow: for `farm sweep --dry-run --tracking-uri
URI` (the GPU-hour estimate at the study's latest sweep's engine starts and profile runs, not the
seed's), and for a sweep's scheduler (farm/analysis/schedule.py), once when the sweep starts."""

from __future__ import annotations

from farm.analysis.durations import measured_durations, merge_durations
from farm.analysis.schedule import estimates_line
from farm.errors import UserError
from farm.run.preflight import check_tracking_uri
from farm.store.location import sqlite_path
from farm.store.mlflow_store import MlflowStore
from farm.study.grid import RUN_OVERHEAD_S, MeasuredDurations
from farm.study.spec import Study

# How many of the study's latest sweeps an estimate reads: each profile's runs and each engine's
# starts come from the newest of them that measured it (farm.analysis.durations.merge_durations).
EARLIER_SWEEPS = 10


def previous_durations(uri: str, study: Study) -> tuple[MeasuredDurations | None, str]:
    """The durations of the study's latest sweeps in `uri` (each profile and engine start from the
    newest that measured it), and a line saying where they come from."""
    db = sqlite_path(uri)
    if uri.startswith("sqlite:") and (db is None or not db.is_file()):
        # an estimate reads a store; it never creates one
        raise UserError(f"no MLflow store at {db or uri}: --dry-run reads the durations of an earlier sweep from it",
                        key="--tracking-uri")
    check_tracking_uri(uri)
    store = MlflowStore(uri)
    sweep_ids = store.sweep_ids(study.name, limit=EARLIER_SWEEPS)
    if not sweep_ids:
        return None, f"no sweep of study {study.name} in {uri}: the estimate uses the seed's durations"
    measured = merge_durations([measured_durations(store.records(s, study), s, RUN_OVERHEAD_S) for s in sweep_ids])
    if measured is None:
        return None, (f"sweep {sweep_ids[0]} of study {study.name} has no finished run: "
                      "the estimate uses the seed's durations")
    return measured, (f"durations from {_sources(measured)} ({measured.runs} runs): engine start "
                      + ", ".join(f"{e} {s:.0f} s" for e, s in measured.start_s.items())
                      + "; runs " + ", ".join(f"{p} {s:.0f} s" for p, s in measured.profile_s.items()))


def _sources(measured: MeasuredDurations) -> str:
    if not measured.also:
        return f"sweep {measured.source}"
    return f"sweeps {measured.source} (then {', '.join(measured.also)} for what it did not measure)"


def schedule_durations(uri: str, study: Study, resume: str | None = None) -> tuple[MeasuredDurations | None, str]:
    """What the scheduler orders a sweep by, and the line that says so. Read before the sweep
    logs its own parent run (so the study's latest sweep is the one before it): a resumed sweep's
    own finished runs first (this cluster, this study), else the study's latest other sweep;
    None (the defaults) where neither finished a run."""
    db = sqlite_path(uri)
    if uri.startswith("sqlite:") and (db is None or not db.is_file()):
        return None, estimates_line(None, f"no store at {db or uri} yet")  # the sweep creates it
    store = MlflowStore(uri)
    tried = []
    try:
        sources = ([resume] if resume else []) + store.sweep_ids(study.name, exclude=resume, limit=EARLIER_SWEEPS)
        found = []
        for sweep_id in sources:
            tried.append(sweep_id)
            # the sweep's own stored study: the records as that sweep's grid and profiles made them
            found.append(measured_durations(store.records(sweep_id), sweep_id, RUN_OVERHEAD_S))
        measured = merge_durations(found)
        if measured is not None:
            return measured, estimates_line(measured)
    except Exception as exc:  # an estimate orders trials; it is never a reason for a sweep not to run
        where = f"sweep {tried[-1]} in {uri}" if tried else uri
        why = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        return None, estimates_line(None, f"could not read {where}: {why}")
    if not tried:
        return None, estimates_line(None, f"no earlier sweep of study {study.name} in {uri}")
    return None, estimates_line(None, f"no finished run in sweep {' or '.join(tried)}")
