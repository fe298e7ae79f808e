"""The driver's side of `--strategy local`: run the steps farm/analysis/local_search.py plans.

Effects layer (MLflow), run by farm/run/search.py's one loop: every decision comes from the pure
planner, replayed from what MLflow holds, so `--resume SWEEP_ID` continues at the step the stored
results say the search stands at. A trial is one MLflow child run however many steps race it:
its first step is logged by the driver as the trial's run, its later steps are appended to it, and
every run carries its step as its pass (files under `files/pass-N`). Each job is stored as it
ends, so a machine lost mid-step costs the trial in flight. The strategy, budget and start, the
per-trial price and the path (each step: who raced, what each neighbour showed, where the search
went, as `local_search.json`) go to the sweep's run through farm/store/searches.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from farm.analysis import local_search as ls
from farm.analysis.halving import Rung, merge_rung
from farm.analysis.outcome import TRANSIENT
from farm.analysis.results import HeldSpan, Status, TrialResult
from farm.errors import UserError
from farm.run.search import BaseStrategy, SearchContext, Stored, register
from farm.study.grid import RUN_OVERHEAD_S, MeasuredDurations, run_seconds, trial_starts
from farm.study.spec import Study
from farm.study.trial import Trial, node_control_id

def knob_flags(trials: list[Trial]) -> dict[str, set[str]]:
    """Trial id -> the flags its knobs rendered (a knob is the coordinate, not its flags)."""
    from farm.engines import get_engine  # the engine renders its own knobs

    out = {}
    for t in trials:
        try:
            out[t.id] = set(get_engine(t.engine).render_knobs(_online(t, t.knobs), {}))
        except Exception:  # noqa: BLE001 - a knob the grid rendered once renders again; if not, no flag is hidden
            out[t.id] = set()
    return out


def _online(t: Trial, knobs: dict) -> dict:
    # A quantization the model variant already has is no flag (farm/study/grid.py resolves it so).
    return {k: v for k, v in knobs.items() if k != "quantization" or t.flags.get("quantization") is not None}


def effective_knobs(trials: list[Trial]) -> dict[str, dict]:
    """Trial id -> its knobs that change what the engine is given: a knob at the value that renders
    no flag (kv_cache_dtype auto, speculative false, a limit left unset) is the engine's default,
    the same as a knob the block did not set, so two trials that start the same server sit at the
    same coordinates."""
    from farm.engines import get_engine

    out = {}
    for t in trials:
        engine, kept = get_engine(t.engine), {}
        for k, v in t.knobs.items():
            try:
                rendered = engine.render_knobs(_online(t, {k: v}), {})
            except Exception:  # noqa: BLE001 - kept as given when it cannot be rendered alone
                rendered = {k: v}
            if rendered or (k == "quantization" and t.flags.get("quantization") is None and v not in (None, "none")):
                kept[k] = v
        out[t.id] = kept
    return out


def estimates(study: Study, grid: str, trials: list[Trial], measured: MeasuredDurations | None = None) -> dict[str, float]:
    """GPU-hours of one trial's job in a step and in the final comparison, before this search
    measured any: a cold engine start and the runs at what the study's earlier sweep measured
    (`measured`), else the seed's durations (farm/study/grid.py)."""
    if not trials:
        return {"step": 0.0, "final": 0.0}
    t = trials[0]
    gpus = max(t.gpus, 1)
    cold, _ = trial_starts(t, measured)
    primary = study.grid_primary_profile(grid)
    one = study.model_copy(update={"repeats": 1})
    primary_run = run_seconds(one, t.model_copy(update={"profiles": [primary]}), measured=measured) - RUN_OVERHEAD_S
    step = cold + ls.STEP_REPEATS * (max(primary_run, 0.0) / ls.STEP_SHRINK + RUN_OVERHEAD_S)
    final = cold + ls.FINAL_REPEATS * run_seconds(one, t.model_copy(update={"profiles": study.grid_profiles(grid)}),
                                                  measured=measured)
    return {"step": step * gpus / 3600, "final": final * gpus / 3600}


def raceable(study: Study, trials: list[Trial], start: str, keep: set[str] = frozenset()) -> list[Trial]:
    """The trials a search may race: not the ones whose numbers would mean nothing (speculative
    decoding on dummy weights) or that the memory-fit model says cannot start; the start always,
    and `keep` (repairs at a limit the engine itself named: its word over the model's)."""
    from farm.analysis.outcome import trial_not_measurable
    from farm.run.memory import unfit_trials

    unfit = unfit_trials(study, trials)
    return [t for t in trials if t.id == start or not (
        t.node_control_of or (t.id in unfit and t.id not in keep)
        or (study.dummy_output_dependent == "skip" and trial_not_measurable(t) is not None))]


# What a failed start's log named (farm.engines.base.Engine.named_limits, kept in the trial's
# engine_reported by its actor) that a repair caps.
LIMIT_KEY = "running_requests_limit"
REPAIR_KNOB = "max_running_requests"


def repaired_trial(t: Trial, value: int) -> Trial | None:
    """`t` with its requests at once capped at `value` (the engine renders the knob), under its own
    id; None where the engine has no such knob."""
    from farm.engines import get_engine
    from farm.study.knobs import KnobError
    from farm.study.trial import trial_id

    try:
        rendered = get_engine(t.engine).render_knobs({REPAIR_KNOB: value}, {})
    except (KnobError, KeyError, ValueError):
        return None
    if not rendered:
        return None
    flags = {**t.flags, **rendered}
    return t.model_copy(update={
        "flags": flags, "knobs": {**t.knobs, REPAIR_KNOB: value},
        "id": trial_id(t.engine, t.model, {**t.required_flags, **flags}, t.weights),
        "name": f"{t.label} (repaired: {REPAIR_KNOB}={value})"})


def repairs(study: Study, trials: list[Trial], results: list[TrialResult],
            recorded: Sequence[ls.Repair] = ()) -> dict[str, tuple[ls.Repair, Trial]]:
    """Trial id -> its repair, for the trials that cannot start here because of how many requests
    they run at once: at the limit a failed start of it named (the engine's word), else at the
    memory-fit model's prediction (before any GPU time). `recorded`: the repairs the sweep itself
    made (its stored plan), which stand where the model cannot be sized here (a report read on
    another machine than the sweep's, without the model's config.json)."""
    from farm.analysis.memory_fit import NoPrediction
    from farm.run.memory import predictions

    failed = {}
    for r in results:
        limit = r.engine_reported.get(LIMIT_KEY)
        if r.status != Status.ok and isinstance(limit, int) and limit >= 1:
            failed[r.trial.id] = (limit, f"{r.status.value}: {r.reason}")
    fits = predictions(study, [t for t in trials if t.id not in failed])
    out: dict[str, tuple[ls.Repair, Trial]] = {}
    for t in trials:
        gpu = study.engines[t.engine].accelerator_type if t.engine in study.engines else None
        if t.id in failed:
            value, cause, source = failed[t.id][0], failed[t.id][1], "engine"
        else:
            p = fits.get(t.id)
            kept = next((r for r in recorded if r.trial == t.id and r.source == "predicted"), None)
            if (p is None or isinstance(p, NoPrediction)) and kept is not None:
                value, cause, source = kept.value, kept.cause, "predicted"
            else:
                value = getattr(p, "repair_running_requests", None)
                if p is None or p.fits or value is None:
                    continue
                cause, source = p.reason, "predicted"
        fixed = repaired_trial(t, value)
        if fixed is not None:
            out[t.id] = (ls.Repair(trial=t.id, repaired=fixed.id, value=value, source=source, cause=cause, gpu=gpu), fixed)
    return out


class SearchSpace:
    """What a search may race, where each trial sits, and the repairs that put trials that cannot
    start here in their originals' places (a repaired trial is that configuration, as it can run)."""

    def __init__(self, study: Study, trials: list[Trial], start: str, results: list[TrialResult],
                 recorded: Sequence[ls.Repair] = ()):
        fixes = repairs(study, trials, results, recorded)
        given = {t.id: t for t in trials}
        swapped = [fixes[t.id][1] if t.id in fixes else t for t in trials]
        original = {fixed.id: tid for tid, (_, fixed) in fixes.items()}
        self.start = fixes[start][1].id if start in fixes else start  # where the search starts from
        self.ranked = raceable(study, swapped, self.start,
                               keep={r.repaired for r, _ in fixes.values() if r.source == "engine"})
        originals = [given[original.get(t.id, t.id)] for t in self.ranked]
        coords = ls.coordinates(originals, knob_flags(originals), effective_knobs(originals))
        self.coords = {t.id: coords[original.get(t.id, t.id)] for t in self.ranked}
        ids = {t.id for t in self.ranked}
        self.repairs = [r for r, _ in fixes.values() if r.repaired in ids]
        self.trials = trials + [fixed for _, fixed in fixes.values()]

    def neighbours(self, incumbent: str) -> dict[str, ls.Neighbour]:
        return {n.trial: n for n in ls.neighbours(incumbent, self.ranked, self.coords)}


def plan_of(study: Study, grid: str, trials: list[Trial], start: str, results: list[TrialResult],
            measured: MeasuredDurations | None = None, estimate: dict[str, float] | None = None,
            recorded: Sequence[ls.Repair] = (), recorded_steps: Sequence[ls.Step] = ()) -> ls.SearchPlan:
    """The plan replayed from `results`. `estimate`: what one trial's job costs before the search
    measured any, as the sweep first priced it (`searches.recorded_local_search_estimate`): a resume or a report that
    priced it anew from other durations could replay another race than the one the sweep ran.
    `recorded`: the repairs of the sweep's stored plan (`repairs`); `recorded_steps`: its steps (a step
    it began is replayed with the race it chose)."""
    profiles = study.grid_profiles(grid)
    space = SearchSpace(study, trials, start, results, recorded)
    if estimate is None:
        estimate = estimates(study, grid, [t for t in space.ranked if t.id == space.start], measured)
    return ls.plan(start, space.ranked, space.coords, results,
                   primary=study.grid_primary_profile(grid), requests={p: study.profiles[p].requests for p in profiles},
                   profiles=profiles, budget_gpu_hours=study.budget_gpu_hours, trial_estimate_gpu_hours=estimate,
                   min_success_rate=study.min_success_rate, repairs=space.repairs,
                   repair_start=study.repair_start, recorded_steps=recorded_steps, margin=study.equivalence_margin)


def resume_control(p: ls.SearchPlan, results: list[TrialResult], by_id: dict[str, Trial]) -> Trial | None:
    """The incumbent once more, first, when a resume picks up a step midway: its trials so far ran
    on the machine of an earlier sitting, and a lent GPU machine lasts one sitting, so the step's
    remaining trials would run on a machine the incumbent never ran on and could not be told from it
    (farm/analysis/stats/blocks.py: across machines only through a control). Raced as a control of
    the incumbent (its own trial, `<incumbent>@resume<step>.<k>`, never ranked), its runs join the
    incumbent's on this machine (ls.blocks_of). None where the step has not begun, the incumbent
    is among the trials still to run, or this is the final comparison."""
    if p.final or not p.steps or not p.trials:
        return None
    step = p.steps[-1]
    if step.outcome != "pending" or step.incumbent not in step.so_far or step.incumbent in p.trials:
        return None
    incumbent = by_id.get(step.incumbent)
    if incumbent is None:
        return None
    k = 1 + sum(1 for r in results if r.trial.node_control_of == step.incumbent
                and any(run.pass_index == step.index for run in r.runs))
    return incumbent.model_copy(update={"id": node_control_id(incumbent.id, f"resume{step.index}.{k}"),
                                        "name": f"{incumbent.label}@resume{step.index}.{k}",
                                        "node_control_of": incumbent.id})


def search_trials(study: Study, trials: list[Trial], results: list[TrialResult],
                  recorded: Sequence[ls.Repair] = ()) -> list[Trial]:
    """The grid's trials and the repaired ones the search may race (a job needs its trial)."""
    return trials + [fixed for _, fixed in repairs(study, trials, results, recorded).values()]


def rung_study(study: Study, rung: Rung) -> Study:
    """The study with the step's shortened profile added (`<primary>.rung1`)."""
    from farm.analysis.halving import rung_study as add_rungs

    return add_rungs(study, [rung])


@register("local")
class LocalSearch(BaseStrategy):
    """Step after step until the planner says done. Every job of a search is stored by the runner
    as it ends: a trial's first job as its run, a later one appended to it."""

    announces = "rung"
    prices_steps = True
    takes_budget = True
    starts_from = True
    plans_repeats = True
    title = "local search"

    def __init__(self, ctx: SearchContext) -> None:
        super().__init__(ctx)
        if ctx.start is None:
            raise UserError("strategy local needs a start (--from)", key="--from")
        self.start: str = ctx.start
        self.estimate: dict[str, float] | None = None
        self.began_steps: list[ls.Step] = []
        self.by_id: dict[str, Trial] = {}
        self.results: dict[str, TrialResult] = {}

    @classmethod
    def dry_run_lines(cls, study: Study, grid: str, trials: list[Trial], *, fits: dict, measured=None,
                      start: str | None = None, waits: bool = False) -> list[str]:
        return start_lines(study, grid, trials, start, measured) if start is not None else []

    def begin(self) -> None:
        # mlflow: not for the registry's readers (`farm sweep --dry-run`, its options)
        from farm.store import searches, tracking

        c = self.ctx
        searches.record_strategy(c.tracking_uri, c.sweep_id, "local", c.study.budget_gpu_hours, start=self.start)
        self.estimate = searches.recorded_local_search_estimate(c.tracking_uri, c.sweep_id)
        if self.estimate is None:  # priced once, when the search starts; a resume replays at the same price
            space = SearchSpace(c.study, c.trials, self.start, tracking.load_results(c.tracking_uri, c.sweep_id))
            self.estimate = estimates(c.study, c.grid, [t for t in space.ranked if t.id == space.start], c.measured)
            searches.record_local_search_estimate(c.tracking_uri, c.sweep_id, self.estimate)
        # A resume replays the steps the sweep began as it began them (the race it chose then), even where
        # this machine's memory-fit model or this version's repairs would choose another.
        began = searches.recorded_local_search_plan(c.tracking_uri, c.sweep_id)
        self.began_steps = began.steps if began is not None else []

    def plan(self, stored: list[TrialResult], first: bool) -> ls.SearchPlan:
        c = self.ctx
        return plan_of(c.study, c.grid, c.trials, self.start, stored, c.measured, self.estimate,
                       recorded_steps=self.began_steps)

    def jobs(self, p: ls.SearchPlan, stored: list[TrialResult], first: bool) -> list:
        c = self.ctx
        self.by_id = {t.id: t for t in search_trials(c.study, c.trials, stored)}
        self.results = {r.trial.id: r for r in stored}  # what after_store adds each stored job to
        todo = p.trials
        if not p.final and todo and todo[0] == p.incumbent and not _ever_measured(stored, p.incumbent):
            # A start not yet seen to serve runs alone first: if it cannot start, no neighbour is
            # raced against it (the next plan repairs it, or says why the search stops).
            todo = todo[:1]
        # a step begun by an earlier call gets its control first
        control = resume_control(p, stored, self.by_id) if first else None
        if control is not None:
            self.by_id[control.id] = control
            todo = [control.id] + list(todo)
        return [self._job(self.by_id[t], p.rung) for t in todo]

    def _job(self, t: Trial, rung: Rung):
        job = self.ctx.make_job(t.model_copy(update={"profiles": list(rung.profiles), "profile_repeats": {}}),
                                rung.repeats, rung.index)
        rstudy = rung_study(self.ctx.study, rung)
        # The final comparison is the first job of the search with the full profiles: a capacity
        # profile's search runs there (a later pass otherwise adds no load to search). The runner
        # stores every job, none logs itself.
        return job.model_copy(update={"profiles": {q: rstudy.profiles[q] for q in rung.profiles},
                                      "search_capacity": rung.last, "tracking_uri": None, "parent_run_id": None,
                                      "workdir": str(Path(job.workdir) / f"step-{rung.index}")})

    def store(self, new: TrialResult, previous: TrialResult | None, p: ls.SearchPlan) -> Stored | None:
        if new.status in TRANSIENT or new.status == Status.cancelled:
            return None  # nothing measured: the planner asks for it again
        rung = p.rung
        if previous is not None:
            return Stored(merged=merge_rung(previous, new, rung), index=rung.index)
        return Stored(first=new.model_copy(update={
            "trial": self.by_id[new.trial.id].model_copy(update={"profiles": list(rung.profiles), "profile_repeats": {}}),
            "runs": [r.model_copy(update={"pass_index": rung.index}) for r in new.runs],
            "spans": [HeldSpan(pass_index=rung.index, started_at=new.started_at, finished_at=new.finished_at,
                               node=new.node, engine_reported=dict(new.engine_reported))]
            if new.started_at and new.finished_at else []}))

    def record(self, p: ls.SearchPlan) -> None:
        from farm.store import searches  # mlflow, as in begin

        searches.record_local_search(self.ctx.tracking_uri, self.ctx.sweep_id, p)

    def after_store(self, p: ls.SearchPlan, how: Stored) -> None:
        # The plan as it stands with this job stored, recorded at once: a report read where the
        # models' config.json are not (another machine) shows what this one knew. The results are
        # the round's, kept up to date with what the runner stored (no reload from the store).
        result = how.merged if how.merged is not None else how.first
        if result is not None:
            self.results[result.trial.id] = result
        self.record(self.plan(sorted(self.results.values(), key=lambda r: r.trial.index), False))

    def stopped(self, p: ls.SearchPlan) -> ls.SearchPlan:
        return p.model_copy(update={"done": True, "stop": "failed", "reason": f"{p.reason}: measured nothing"})


def _ever_measured(results: list[TrialResult], trial: str) -> bool:
    return any(r.trial.id == trial and any(run.status == Status.ok for run in r.runs) for r in results)


def start_lines(study: Study, grid: str, trials: list[Trial], start: str,
                measured: MeasuredDurations | None = None) -> list[str]:
    """What `--dry-run` says of a local search: where it starts and what its first step races
    (nothing measured yet); a start that cannot start here is said so, with the repair the search
    starts from instead."""
    out: list[str] = []
    p = plan_of(study, grid, trials, start, [], measured)
    space = SearchSpace(study, trials, start, [])
    labels = {t.id: t.label for t in space.trials}
    budget = f"search budget {study.budget_gpu_hours:g} GPU-hours" if study.budget_gpu_hours else "no budget"
    est = estimates(study, grid, [t for t in space.trials if t.id == space.start], measured)
    out.append(f"strategy local from {labels[start]} ({budget}; ~{est['step']:.3f} GPU-hours a raced trial, "
               f"~{2 * est['final']:.3f} for the final comparison of two trials on every profile, after the search)")
    own = [r for r in p.repairs if r.trial == start]
    for r in own:
        out.append(f"  your command {ls.start_failure_text(r)}")
    if len(p.repairs) > len(own):
        out.append(f"  {len(p.repairs) - len(own)} other trial(s) of the grid cannot start here either and are raced repaired "
                   f"the same way (each trial's memory line below says why)")
    if not p.steps:
        out.append(f"  {p.reason}")
        return out
    step = p.steps[-1]
    out.append(f"  step 1 races {labels[p.start]} against {len(step.race) - 1} neighbour(s) at alpha {step.alpha:.3g} "
               f"(Holm), {p.rung.repeats} runs each of {next(iter(p.rung.requests.values()))} requests of "
               f"{next(iter(p.rung.profiles.values()))}:")
    nbrs = space.neighbours(p.start)
    for tid in step.race[1:]:
        out.append(f"    {labels[tid]}: " + ls.judged_text(ls.Judged(neighbour=nbrs[tid], runs=0, why="to race")))
    if step.unraced:
        out.append(f"    not raced in step 1 (budget): " + ", ".join(
            ls.judged_text(ls.Judged(neighbour=nbrs[t], runs=0, why="")).rstrip(": ") for t in step.unraced))
    return out
