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
from farm.study.spec import Study
from farm.study.trial import Trial


def rung_trial(trial: Trial, rung: halving.Rung) -> Trial:
    return trial.model_copy(update={"profiles": list(rung.profiles), "profile_repeats": {}})


@register("halving")
class Halving(BaseStrategy):
    """Rung after rung until the planner says done. Rung 1 is each trial's first pass, logged by its
    actor; a later rung is appended to the trial's run."""

    announces = "rung"
    prunes_unfit = True  # the memory fit's pruning needs the GPU model (farm/run/memory.py)
    takes_budget = True
    plans_repeats = True
    title = "halving"

    def __init__(self, ctx: SearchContext) -> None:
        super().__init__(ctx)
        self.study = ctx.study.model_copy(update={"budget_gpu_hours": ctx.budget_gpu_hours})
        self.by_id = {t.id: t for t in ctx.trials}
        self.labels = {t.id: t.label for t in ctx.trials if not t.node_control_of}

    @classmethod
    def dry_run_lines(cls, study: Study, grid: str, trials: list[Trial], *, fits: dict, measured=None,
                      start: str | None = None, waits: bool = False) -> list[str]:
        """The budget, the trials the memory fit prunes, the rungs and what rung 1 of every trial costs."""
        from farm.analysis.memory_fit import NoPrediction

        budget = f"budget {study.budget_gpu_hours:g} GPU-hours" if study.budget_gpu_hours else "no budget"
        unfit = sum(1 for p in fits.values() if p is not None and not p.fits)
        unknown = sum(1 for t in trials if fits.get(t.id) is None or isinstance(fits[t.id], NoPrediction))
        # "not predicted" is not "fits": a trial the model could not size starts, and says so
        unsized = f"; {unknown} not predicted (no memory-fit model for them: they start)" if unknown else ""
        if waits:  # sized once the cluster names its GPU model (the dry run's note), not started unsized
            unsized = f"; {unknown} not predicted yet (accelerator_type auto)" if unknown else ""
        out = [f"strategy halving ({budget}); {unfit} trial(s) pruned: does not fit{unsized}; rungs:"]
        rungs = halving.study_rungs(study, grid, len(trials) - unfit)
        priors = halving.study_priors(study, grid, trials)
        for r in rungs:
            out.append(f"  rung {r.index}: " + ", ".join(f"{p} x{r.requests[p]} requests" for p in r.profiles)
                       + f", {r.repeats} repeat(s), stops at alpha {r.alpha:.3g}; "
                       f"~{halving.rung_cost(r, 1, rungs, {}, priors) * 3600:.0f} s a trial")
        first = sum(halving.rung_cost(rungs[0], t.gpus, rungs, {}, priors) for t in trials
                    if not (fits.get(t.id) and not fits[t.id].fits))
        out.append(f"  rung 1 of every trial: ~{first:.1f} GPU-hours (the grid estimate's durations); a smaller budget "
                   f"runs rung 1 for the trials it pays for, in grid order, and `--resume` with a larger one goes on")
        return out

    def begin(self) -> None:
        from farm.store import searches  # mlflow: not for the registry's readers (`farm sweep --dry-run`)

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
            from farm.store import searches  # mlflow, as in begin

            searches.record_halving(self.ctx.tracking_uri, self.ctx.sweep_id, p, halving.summary_lines(p, self.labels))

    def stopped(self, p: halving.RungPlan) -> halving.RungPlan:
        return p.model_copy(update={"done": True, "reason": f"rung {p.rung.index} measured nothing"})
