"""The driver's side of `--strategy halving`: run the rungs that farm/analysis/halving.py plans.

Effects layer (MLflow), run by farm/run/search.py's one loop: every decision comes from the pure
planner, computed from what MLflow holds, so `--resume SWEEP_ID` continues at the rung the stored
results say the sweep stands at. Each trial stays one MLflow child run: rung 1 is logged by its
actor (the trial's first pass), a later rung is appended to it by the driver (its runs carry the
rung as their pass, files under `files/pass-N`). The early rungs' runs carry shortened profile
names (`<profile>.rung<N>`), so the final selection, on the study's own profiles, judges the last
rung alone. The strategy and budget, the last plan, what each rung spent and why each trial
stopped go to the sweep's run through farm/store/searches.py (`halving.md`, `halving.json`).
"""

from __future__ import annotations

from farm.analysis import halving
from farm.analysis.outcome import TRANSIENT
from farm.analysis.results import Status, TrialResult
from farm.run.search import BaseStrategy, SearchContext, Stored, register
from farm.store import searches
from farm.study.trial import Trial


def rung_trial(trial: Trial, rung: halving.Rung) -> Trial:
    return trial.model_copy(update={"profiles": list(rung.profiles), "profile_repeats": {}})


@register("halving")
class Halving(BaseStrategy):
    """Rung after rung until the planner says done. Rung 1 is each trial's first pass, logged by its
    actor; a later rung is appended to the trial's run."""

    announces = "rung"
    prunes_unfit = True  # the memory fit's pruning needs the GPU model (farm/run/memory.py)

    def __init__(self, ctx: SearchContext) -> None:
        super().__init__(ctx)
        self.study = ctx.study.model_copy(update={"budget_gpu_hours": ctx.budget_gpu_hours})
        self.by_id = {t.id: t for t in ctx.trials}
        self.labels = {t.id: t.label for t in ctx.trials if not t.node_control_of}

    def begin(self) -> None:
        # A later `--resume` without --strategy continues as what it is (farm/cli/main.py reads these).
        searches.record_strategy(self.ctx.tracking_uri, self.ctx.sweep_id, "halving", self.ctx.budget_gpu_hours)

    def plan(self, stored: list[TrialResult], first: bool) -> halving.RungPlan:
        return halving.plan_from_results(self.study, self.ctx.grid, self.ctx.trials, stored, self.ctx.pruned)

    def jobs(self, p: halving.RungPlan, stored: list[TrialResult], first: bool) -> list:
        rung = p.rung
        rstudy = halving.rung_study(self.ctx.study, [rung])
        jobs = []
        for t in p.trials:
            job = self.ctx.make_job(rung_trial(self.by_id[t], rung), rung.repeats, rung.index)
            # the last rung brings the full profiles, capacity ones included, for the first time
            jobs.append(job.model_copy(update={"profiles": {q: rstudy.profiles[q] for q in rung.profiles},
                                               "search_capacity": rung.last}))
        return jobs

    def store(self, new: TrialResult, previous: TrialResult | None, p: halving.RungPlan) -> Stored | None:
        if new.status == Status.cancelled:
            return None
        if p.rung.index == 1:
            return Stored(by_actor=True)  # rung 1 was logged by its actor (the trial's first pass)
        if new.status in TRANSIENT or previous is None:
            return None  # nothing measured (or nowhere to put it): the trial keeps what it had
        return Stored(merged=halving.merge_rung(previous, new, p.rung), index=p.rung.index)

    def record(self, p: halving.RungPlan) -> None:
        if p.done:
            searches.record_halving(self.ctx.tracking_uri, self.ctx.sweep_id, p, halving.summary_lines(p, self.labels))

    def stopped(self, p: halving.RungPlan) -> halving.RungPlan:
        return p.model_copy(update={"done": True, "reason": f"rung {p.rung.index} measured nothing"})
