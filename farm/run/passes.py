"""The driver's extra runs: the baseline on every node, and the later passes of `--repeats auto`.

Effects layer (Ray, MLflow); every decision comes from the pure pass plan (farm/analysis/plan.py), computed from what
MLflow holds, so a resumed sweep continues exactly where the stored results say it stands.

MLflow: each trial stays one child run. A later pass runs the trial again on a fresh engine
(its own actor, `pass-N` working directory, its own seeded order of runs, repeat numbers
continuing the trial's), and the driver appends it to the trial's child run: the merged
`result.json` replaces the old one, `<profile>/<metric>` is logged again at step N-1 (the mean
over every run so far), `<profile>/runs/<metric>` gets the new runs at their repeat numbers, and
the pass's files go under `files/pass-N`. A later pass is logged by the driver, not its actor: if
the driver dies before that, the pass is lost but the trial keeps what it had, and `--resume`
plans the next pass again from the stored results.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import ray

from farm.analysis import plan
from farm.store import tracking
from farm.analysis.outcome import TRANSIENT
from farm.analysis.results import Status, TrialResult
from farm.study.spec import Study
from farm.study.trial import Trial


def node_controls(study: Study, trials: list[Trial], cpus_per_trial: float) -> list[tuple[Trial, str]]:
    """(node-control trial, Ray node id) for each node able to run the baseline, when there are several."""
    nodes = plan.node_names(ray.nodes())
    baseline = plan.baseline_trial(study, trials)
    first_index = max((t.index for t in trials), default=0) + 1
    accel = study.engines[baseline.engine].accelerator_type if baseline is not None else None
    copies = plan.node_baselines(baseline, nodes, first_index=first_index, cpus_per_trial=cpus_per_trial,
                                 accelerator_type=accel)
    return [(t, n.node_id) for t, n in copies]


def run_auto(study: Study, grid: str, trials: list[Trial], *, tracking_uri: str, sweep_id: str,
             make_job: Callable[[Trial, int, int], object],
             run_jobs: Callable[[list, Callable[[TrialResult], None]], list[TrialResult]],
             on_pass: Callable[[plan.PassPlan], None] = lambda p: None) -> list[plan.PassPlan]:
    """Later passes of `--repeats auto` until the ranking separates, the budget is spent or the
    look limit is reached. `make_job(trial, repeats, pass_index)` builds a job that does not log
    itself; `run_jobs(jobs, on_result)` runs jobs (the driver's `run_trials`), handing each
    final result to `on_result` as its trial ends. Returns the plans, the last one done."""

    by_id = {t.id: t for t in trials}
    plans: list[plan.PassPlan] = []
    # Judged as an auto sweep (alpha per look) even when called with a study that says otherwise.
    study = study if plan.is_auto(study.repeats) else study.model_copy(update={"repeats": "auto"})
    finishing = True  # the rest of an interrupted pass comes first, once (it may fail again)
    while True:
        stored = tracking.load_results(tracking_uri, sweep_id)
        p = plan.unfinished_pass(stored, study, grid, sweep_id) if finishing else None
        finishing = False
        if p is None:
            p = plan.pass_from_stored(stored, study, grid, sweep_id)
        plans.append(p)
        on_pass(p)
        if p.done:
            return plans
        previous = {r.trial.id: r for r in stored}
        run_ids = tracking.trial_run_ids(tracking_uri, sweep_id)
        primary = study.grid_primary_profile(grid)
        jobs = [make_job(plan.pass_trial(by_id[t], primary), p.repeats, p.pass_index) for t in p.trials if t in by_id]
        appended: list[str] = []

        def append(new: TrialResult, pass_index: int = p.pass_index) -> None:
            # Each trial's pass is stored as soon as it ends: a machine lost mid-pass (a GPU lease
            # ending) costs the trial in flight, not the pass's trials before it.
            tid = new.trial.id
            if not new.runs or new.status in TRANSIENT or new.status == Status.cancelled or tid not in run_ids:
                return  # nothing measured (or nowhere to put it): the trial keeps what it had
            merged = plan.merge_pass(previous[tid], new, pass_index)
            tracking.append_pass(tracking_uri, run_ids[tid], merged, new, pass_index,
                                 Path(new.artifacts_dir) if new.artifacts_dir else None)
            appended.append(tid)

        run_jobs(jobs, append)
        if not appended:
            stop = plan.PassPlan(done=True, reason=f"pass {p.pass_index} measured nothing", pass_index=p.pass_index,
                                 spent=p.spent, budget=p.budget)
            on_pass(stop)
            return plans + [stop]
