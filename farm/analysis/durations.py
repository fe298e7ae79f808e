"""Durations measured by an earlier sweep of a study, for the GPU-hour estimate of the next one
(`farm sweep --dry-run --tracking-uri URI`): each engine's start (launch to ready) and each
profile's run (its wall time in the actor where recorded, guidellm's duration plus the default
overhead otherwise), as medians over the sweep's runs that ended `ok`. The trial scheduler
(farm/analysis/schedule.py) reads the same medians, with an engine's cold starts (it compiled from
scratch) and warm ones (the node's compile cache held its graph) apart."""

from __future__ import annotations

import statistics

from farm.analysis.records import Results
from farm.analysis.results import Status
from farm.study.grid import MeasuredDurations


def measured_durations(results: Results, source: str, run_overhead_s: float) -> MeasuredDurations | None:
    """None when the sweep has no run that ended `ok`."""
    starts: dict[str, dict[str, tuple[float, bool | None]]] = {}  # engine -> trial -> (seconds, cold)
    per_profile: dict[str, list[float]] = {}
    runs = 0
    for rec in results.records:
        if rec.status != Status.ok or not rec.metrics:
            continue
        prov = rec.provenance
        if prov is not None and prov.engine_start_s is not None:
            starts.setdefault(rec.engine, {})[rec.trial] = (prov.engine_start_s, prov.engine_start_cold)
        if prov is not None and prov.run_wall_s is not None:
            seconds = prov.run_wall_s
        elif rec.metrics.get("duration_s") is not None:
            seconds = rec.metrics["duration_s"] + run_overhead_s
        else:
            continue
        per_profile.setdefault(rec.profile, []).append(seconds)
        runs += 1
    if not runs:
        return None
    return MeasuredDurations(source=source, runs=runs,
                             start_s=_medians(starts, lambda cold: True),
                             cold_start_s=_medians(starts, lambda cold: cold is True),
                             warm_start_s=_medians(starts, lambda cold: cold is False),
                             profile_s={p: round(statistics.median(v), 2) for p, v in per_profile.items()})


def _medians(starts: dict[str, dict[str, tuple[float, bool | None]]], kind) -> dict[str, float]:
    """Engine -> median start of the kind asked for; an engine with none of that kind is left out
    (a start whose cache state went unrecorded is neither cold nor warm)."""
    out = {}
    for engine, by_trial in starts.items():
        seconds = [s for s, cold in by_trial.values() if kind(cold)]
        if seconds:
            out[engine] = round(statistics.median(seconds), 2)
    return out


def merge_durations(measured: list[MeasuredDurations | None]) -> MeasuredDurations | None:
    """One estimate from several sweeps' durations, the first (newest, or the resumed sweep's own)
    first: each profile's run and each engine's start (cold, warm, any) from the first sweep that
    measured it. A sweep that ran only some profiles (a warm-start check on a short profile, a
    search's short rungs) then leaves the others to the sweeps that ran them, instead of to the
    study's `max_seconds` (a local search on the H200 once priced a raced trial at 0.5 GPU-hours
    for a primary profile whose runs take 100 s)."""
    present = [m for m in measured if m is not None]
    if not present:
        return None
    first, merged = present[0], present[0].model_copy(deep=True)
    for m in present[1:]:
        added = False
        for field in ("start_s", "cold_start_s", "warm_start_s", "profile_s"):
            mine = getattr(merged, field)
            for key, value in getattr(m, field).items():
                if key not in mine:
                    mine[key] = value
                    added = True
        if added:
            merged.also.append(m.source)
            merged.runs += m.runs
    return merged if merged.also else first
