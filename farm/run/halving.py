"""The driver's side of `--strategy halving`: run the rungs that farm/analysis/halving.py plans.

Effects layer (Ray, MLflow), modelled on farm/run/passes.py: every decision comes from the pure
planner, computed from what MLflow holds, so `--resume SWEEP_ID` continues at the rung the stored
results say the sweep stands at. Each trial stays one MLflow child run: rung 1 is logged by its
actor (the trial's first pass), a later rung is appended to it by the driver (its runs carry the
rung as their pass, files under `files/pass-N`). The early rungs' runs carry shortened profile
names (`<profile>.rung<N>`), so the final selection, on the study's own profiles, judges the last
rung alone. The strategy and budget, the last plan, what each rung spent and why each trial
stopped go to the sweep's run through farm/store/searches.py (`halving.md`, `halving.json`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from farm.analysis import halving
from farm.analysis.outcome import TRANSIENT
from farm.analysis.results import Status, TrialResult
from farm.store import searches, tracking
from farm.study.spec import Study
from farm.study.trial import Trial


def rung_trial(trial: Trial, rung: halving.Rung) -> Trial:
    return trial.model_copy(update={"profiles": list(rung.profiles), "profile_repeats": {}})


def run_halving(study: Study, grid: str, trials: list[Trial], *, tracking_uri: str, sweep_id: str,
                budget_gpu_hours: float | None, make_job: Callable[[Trial, halving.Rung], object],
                run_jobs: Callable[[list], list[TrialResult]], pruned: dict[str, str] | None = None,
                on_rung: Callable[[halving.RungPlan], None] = lambda p: None) -> halving.RungPlan:
    """Rung after rung until the planner says done; returns its last plan."""
    by_id = {t.id: t for t in trials}
    ranked = [t for t in trials if not t.node_control_of]
    study = study.model_copy(update={"budget_gpu_hours": budget_gpu_hours})
    # A later `--resume` without --strategy continues as what it is (farm/cli/main.py reads these).
    searches.record_strategy(tracking_uri, sweep_id, "halving", budget_gpu_hours)
    while True:
        stored = tracking.load_results(tracking_uri, sweep_id)
        p = halving.plan_from_results(study, grid, trials, stored, pruned)
        on_rung(p)
        if p.done:
            _record(tracking_uri, sweep_id, p, {t.id: t.label for t in ranked})
            return p
        previous = {r.trial.id: r for r in stored}
        run_ids = tracking.trial_run_ids(tracking_uri, sweep_id)
        jobs = [make_job(by_id[t], p.rung) for t in p.trials]
        measured = 0
        for new in run_jobs(jobs):
            tid = new.trial.id
            if p.rung.index == 1 or new.status == Status.cancelled:
                measured += new.status != Status.cancelled
                continue  # rung 1 was logged by its actor (the trial's first pass)
            if new.status in TRANSIENT or tid not in run_ids or tid not in previous:
                continue  # nothing measured (or nowhere to put it): the trial keeps what it had
            merged = halving.merge_rung(previous[tid], new, p.rung)
            tracking.append_pass(tracking_uri, run_ids[tid], merged, new, p.rung.index,
                                 Path(new.artifacts_dir) if new.artifacts_dir else None)
            measured += 1
        if measured == 0:
            stop = p.model_copy(update={"done": True, "reason": f"rung {p.rung.index} measured nothing"})
            on_rung(stop)
            _record(tracking_uri, sweep_id, stop, {t.id: t.label for t in ranked})
            return stop


def _record(uri: str, sweep_id: str, p: halving.RungPlan, labels: dict[str, str]) -> None:
    searches.record_halving(uri, sweep_id, p, halving.summary_lines(p, labels))
