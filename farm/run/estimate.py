"""`farm sweep --dry-run --tracking-uri URI`: the GPU-hour estimate at the durations the study's
latest sweep in that store measured (its engines' starts, its profiles' runs), not the seed's."""

from __future__ import annotations

from farm.analysis.durations import measured_durations
from farm.errors import UserError
from farm.run.preflight import check_tracking_uri, sqlite_path
from farm.store.mlflow_store import MlflowStore
from farm.study.grid import RUN_OVERHEAD_S, MeasuredDurations
from farm.study.spec import Study


def previous_durations(uri: str, study: Study) -> tuple[MeasuredDurations | None, str]:
    """The durations of the study's latest sweep in `uri`, and a line saying where they come from."""
    db = sqlite_path(uri)
    if uri.startswith("sqlite:") and (db is None or not db.is_file()):
        # an estimate reads a store; it never creates one
        raise UserError(f"no MLflow store at {db or uri}: --dry-run reads the durations of an earlier sweep from it",
                        key="--tracking-uri")
    check_tracking_uri(uri)
    store = MlflowStore(uri)
    try:
        sweep_id = store.latest_sweep(study.name)
    except UserError:
        return None, f"no sweep of study {study.name} in {uri}: the estimate uses the seed's durations"
    records = store.records(sweep_id, study)
    measured = measured_durations(records, sweep_id, RUN_OVERHEAD_S)
    if measured is None:
        return None, f"sweep {sweep_id} of study {study.name} has no finished run: the estimate uses the seed's durations"
    return measured, (f"durations from sweep {sweep_id} ({measured.runs} runs): engine start "
                      + ", ".join(f"{e} {s:.0f} s" for e, s in measured.start_s.items())
                      + "; runs " + ", ".join(f"{p} {s:.0f} s" for p, s in measured.profile_s.items()))
