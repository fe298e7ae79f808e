"""The end of a sweep: selection over the stored results, the report, and where to look next."""

from __future__ import annotations

import sys

from rich.console import Console

from farm import tracking
from farm.results import Status, TrialResult
from farm.spec import Study

console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def _mean_tps(result: TrialResult, profile: str) -> float | None:
    values = [r.metrics.total_tps for r in result.runs_of(profile) if r.metrics is not None]
    return sum(values) / len(values) if values else None


def first_selection(results: list[TrialResult], profile: str) -> TrialResult | None:
    eligible = [r for r in results if r.status == Status.ok and _mean_tps(r, profile) is not None]
    return max(eligible, key=lambda r: _mean_tps(r, profile), default=None)


def finish(study: Study, grid: str, outcome, uri: str) -> None:
    profile = study.grid_primary_profile(grid)
    best = first_selection(outcome.results, profile)
    tracking.finish_sweep(uri, outcome.sweep_id, "finished")
    if best is None:
        console.print("no eligible trial: nothing to recommend (see the statuses above)")
    else:
        console.print(f"\nrecommended ({_mean_tps(best, profile):,.0f} total tok/s on {profile}):")
        print(f"  {best.serve_command}")
    console.print(f"\nsweep id: {outcome.sweep_id}")
    console.print(f"results:  mlflow ui --backend-store-uri {uri}")
