"""The driver's side of `--strategy halving`: run the rungs that farm/analysis/halving.py plans.

Effects layer (Ray, MLflow), modelled on farm/run/passes.py: every decision comes from the pure
planner, computed from what MLflow holds, so `--resume SWEEP_ID` continues at the rung the stored
results say the sweep stands at. Each trial stays one MLflow child run: rung 1 is logged by its
actor (the trial's first pass), a later rung is appended to it by the driver (its runs carry the
rung as their pass, files under `files/pass-N`). The early rungs' runs carry shortened profile
names (`<profile>.rung<N>`), so the final selection, on the study's own profiles, judges the last
rung alone. What each rung spent and why each trial stopped go to the sweep's run as
`halving.md` and into its description's tags.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from farm.analysis import halving
from farm.analysis.outcome import TRANSIENT
from farm.analysis.results import Status, TrialResult
from farm.store import tracking
from farm.study.spec import Study
from farm.study.trial import Trial


STRATEGY_TAG, BUDGET_TAG = "farm.strategy", "farm.budget_gpu_hours"


def stored_strategy(uri: str, sweep_id: str) -> tuple[str, float | None] | None:
    """The strategy and budget a sweep ran with, from its run's tags (halving or local); None for a grid sweep."""
    tags = tracking.client(uri).get_run(sweep_id).data.tags
    if tags.get(STRATEGY_TAG) not in ("halving", "local"):
        return None
    budget = tags.get(BUDGET_TAG) or None
    return tags[STRATEGY_TAG], float(budget) if budget else None


PLAN_ARTIFACT = "halving.json"  # the driver's last plan, on the sweep's run


def recorded_plan(uri: str, sweep_id: str) -> halving.RungPlan | None:
    """The plan the driver recorded when the sweep's rungs were done; None before that (a sweep
    interrupted mid-rung), or for a grid sweep."""
    raw = tracking.read_artifact(uri, sweep_id, PLAN_ARTIFACT)
    if raw is None:  # a grid sweep, or one interrupted mid-rung
        return None
    try:
        return halving.RungPlan.model_validate_json(raw)
    except ValueError:  # written by a farm with another plan schema: the stored results still tell
        return None


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
    c = tracking.client(tracking_uri)
    c.set_tag(sweep_id, STRATEGY_TAG, "halving")
    c.set_tag(sweep_id, BUDGET_TAG, "" if budget_gpu_hours is None else repr(float(budget_gpu_hours)))
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
    c = tracking.client(uri)
    c.log_text(sweep_id, "\n".join(halving.summary_lines(p, labels)) + "\n", "halving.md")
    c.log_text(sweep_id, json.dumps(p.model_dump(mode="json"), indent=1), PLAN_ARTIFACT)
    c.set_tag(sweep_id, "farm.halving_gpu_hours", f"{p.spent_gpu_hours:.4f}")
    for r, h in p.spent_by_rung.items():
        c.log_metric(sweep_id, f"halving/rung_{r}_gpu_hours", h)
