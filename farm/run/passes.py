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

from farm.analysis import plan
from farm.analysis.outcome import TRANSIENT
from farm.analysis.results import Status, TrialResult
from farm.study.names import readable_ids
from farm.study.spec import Study
from farm.study.trial import Trial
from farm.run.search import BaseStrategy, SearchContext, Stored, register


def node_controls(study: Study, trials: list[Trial], cpus_per_trial: float) -> list[tuple[Trial, str]]:
    """(node-control trial, Ray node id) for each node able to run the baseline, when there are several."""
    import ray  # seconds of imports: not for the registry's readers (`farm sweep --dry-run`, its options)

    nodes = plan.node_names(ray.nodes())
    baseline = plan.baseline_trial(study, trials)
    first_index = max((t.index for t in trials), default=0) + 1
    accel = study.engines[baseline.engine].accelerator_type if baseline is not None else None
    copies = plan.node_baselines(baseline, nodes, first_index=first_index, cpus_per_trial=cpus_per_trial,
                                 accelerator_type=accel)
    return [(t, n.node_id) for t, n in copies]


@register("auto")
class RepeatsAuto(BaseStrategy):
    """Later passes of `--repeats auto` until the ranking separates, the budget is spent or the look
    limit is reached. A pass's jobs do not log themselves: each is appended to its trial's run."""

    announces = "pass"
    chosen = False  # it follows the grid's first pass (`--repeats auto`), never a --strategy of its own
    title = "--repeats auto"

    def __init__(self, ctx: SearchContext) -> None:
        super().__init__(ctx)
        study = ctx.study
        # Judged as an auto sweep (alpha per look) even when called with a study that says otherwise.
        self.study = study if plan.is_auto(study.repeats) else study.model_copy(update={"repeats": "auto"})
        self.by_id = {t.id: t for t in ctx.trials}
        self.finishing = False  # the plan at hand finishes a pass cut short (unfinished_pass)

    @classmethod
    def resume_note(cls, study: Study, grid: str, uri: str, sweep_id: str) -> tuple[str, bool]:
        """The pass a resume runs next, planned from the stored results as the sweep will plan it."""
        from farm.store.tracking import load_results  # mlflow: a resume's dry run reads its store
        from farm.study.grid import expand

        from farm.store.searches import recorded_auto_passes

        stored = load_results(uri, sweep_id)
        nxt = (plan.unfinished_pass(stored, study, grid, sweep_id, recorded_auto_passes(uri, sweep_id))
               or plan.pass_from_stored(stored, study, grid, sweep_id))
        names = {t.id: t.label for t in expand(study, grid)} | {r.trial.id: r.trial.label for r in stored}
        text = "--repeats auto: " + (
            f"no further pass ({nxt.reason})" if nxt.done else
            f"pass {nxt.pass_index} runs the primary profile {nxt.repeats} more times on {len(nxt.trials)} trial(s), "
            f"{nxt.runs} runs, {nxt.spent + nxt.runs} of a budget of {nxt.budget}: {nxt.reason}")
        return readable_ids(text, names), not nxt.done

    def plan(self, stored: list[TrialResult], first: bool) -> plan.PassPlan:
        from farm.store.searches import recorded_auto_passes  # mlflow: not at the registry's import

        # the rest of an interrupted pass comes first, once (it may fail again)
        p = plan.unfinished_pass(stored, self.study, self.ctx.grid, self.ctx.sweep_id,
                                 recorded_auto_passes(self.ctx.tracking_uri, self.ctx.sweep_id)) if first else None
        self.finishing = p is not None
        return p if p is not None else plan.pass_from_stored(stored, self.study, self.ctx.grid, self.ctx.sweep_id)

    def record(self, p: plan.PassPlan) -> None:
        # A pass's plan as it starts; the rest of a pass cut short keeps the plan it had.
        if not p.done and p.trials and not self.finishing:
            from farm.store.searches import record_auto_pass

            record_auto_pass(self.ctx.tracking_uri, self.ctx.sweep_id, p.pass_index, list(p.trials))

    def jobs(self, p: plan.PassPlan, stored: list[TrialResult], first: bool) -> list:
        primary = self.study.grid_primary_profile(self.ctx.grid)
        return [self.ctx.make_job(plan.pass_trial(self.by_id[t], primary), p.repeats, p.pass_index)
                for t in p.trials if t in self.by_id]

    def store(self, new: TrialResult, previous: TrialResult | None, p: plan.PassPlan) -> Stored | None:
        if not new.runs or new.status in TRANSIENT or new.status == Status.cancelled or previous is None:
            return None  # nothing measured: the trial keeps what it had
        return Stored(merged=plan.merge_pass(previous, new, p.pass_index), index=p.pass_index)

    def stopped(self, p: plan.PassPlan) -> plan.PassPlan:
        return plan.PassPlan(done=True, reason=f"pass {p.pass_index} measured nothing", pass_index=p.pass_index,
                             spent=p.spent, budget=p.budget)
