"""Durations measured by an earlier sweep of a study, for the GPU-hour estimate of the next one
(`farm sweep --dry-run --tracking-uri URI`): each engine's start (launch to ready) and each
profile's run (its wall time in the actor where recorded, guidellm's duration plus the default
overhead otherwise), as medians over the sweep's runs that ended `ok`."""

from __future__ import annotations

import statistics

from farm.analysis.records import Results
from farm.analysis.results import Status
from farm.study.grid import MeasuredDurations


def measured_durations(results: Results, source: str, run_overhead_s: float) -> MeasuredDurations | None:
    """None when the sweep has no run that ended `ok`."""
    starts: dict[str, dict[str, float]] = {}
    per_profile: dict[str, list[float]] = {}
    runs = 0
    for rec in results.records:
        if rec.status != Status.ok or not rec.metrics:
            continue
        prov = rec.provenance
        if prov is not None and prov.engine_start_s is not None:
            starts.setdefault(rec.engine, {})[rec.trial] = prov.engine_start_s
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
                             start_s={e: round(statistics.median(v.values()), 2) for e, v in starts.items()},
                             profile_s={p: round(statistics.median(v), 2) for p, v in per_profile.items()})
