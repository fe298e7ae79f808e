"""Successive halving over a grid under a GPU-hour budget (pure): the rungs, who goes on, what it costs.

Every trial first gets a short rung (fewer requests, the primary profile only, a few repeats); the
trials that are not significantly worse than the rung's leader go on to the next rung, with longer
runs and more profiles; the last rung runs the study's full profiles with repeats, and farm's
ordinary selection picks from it. Nothing here starts anything: the driver (farm/run/halving.py)
asks `next_rung` what to run from what MLflow holds, so a resumed sweep continues at its rung.

Why a trial stops, and only these:
- `significantly worse`: its mean on the primary profile is below the leader's at the rung's alpha
  (Welch/Fieller, farm/analysis/stats). Rank alone never stops a trial.
- `failed`: the rung measured nothing usable of it (its status says why).
- `budget`: the rung's share of the GPU-hour budget pays for fewer trials than are still in the
  race; the ones ranked lowest by mean wait (said as such, never called worse).
- `does not fit` (before rung 1): the memory-fit model (farm/analysis/memory_fit.py) says it
  cannot start on its GPUs.

Alpha: every rung judges at `FAMILY_ALPHA / len(rungs)` (Bonferroni over the rungs), so the chance
that the true best is stopped at any rung stays at most 5 %: each rung makes one comparison that
involves it (the best against the rung's leader).

Budget: GPU-hours as the records count them, a trial's wall time (engine start + runs) times the
GPUs it holds; a trial that holds none (the mock engine, CPU builds) counts as one, so a budget
means the same on a laptop. Before each rung the rung's cost is estimated from what earlier
rungs measured (per run, scaled up by requests: the estimate errs high) and the rung may spend at
most an equal share of what is left (rung 1: what is left after the cheapest last rung), so the
last rung is never starved.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import Field

from farm.analysis.results import HeldSpan, TrialResult
from farm.analysis.stats import relative_difference
from farm.strict import Strict
from farm.study.repeats import FAMILY_ALPHA
from farm.study.spec import Study
from farm.study.trial import Trial

ETA = 3                 # each rung aims to keep about 1 / ETA of the trials (the budget share enforces it)
MAX_RUNGS = 3           # more rungs spend more on the middle ones than they save (bench/search.py)
MIN_REQUESTS = 8        # a rung's run is never shorter than this many requests
RUNG_REPEATS = 3        # repeats on the primary profile before the last rung: with 2, a t-test has one degree of freedom and stops nothing
FINAL_REPEATS = 3       # repeats of the last rung unless the study asks for more
PRUNED_MARK = "pruned: does not fit: "  # a does_not_fit stop's reason starts so
RUNG_MARK = ".rung"     # a rung's profile name: `<profile>.rung<N>` (MLflow metric names allow no `~`) (the last rung uses the profiles' own names)


class Rung(Strict):
    """One rung of a halving sweep."""

    index: int = Field(description="1 = the first, shortest rung.")
    profiles: dict[str, str] = Field(description="Name the rung's runs carry -> the study profile it shortens.")
    requests: dict[str, int] = Field(description="Requests of one run, by the rung's profile name.")
    repeats: int = Field(description="Runs of each profile per trial.")
    alpha: float = Field(description="Significance level of this rung's stops.")
    primary: str = Field(description="The rung's name of the primary profile (what decides who goes on).")
    last: bool = False


class Stop(Strict):
    """Why a trial left the race, and where."""

    trial: str
    rung: int = Field(description="The rung after which it stopped (0: before rung 1).")
    kind: str = Field(description="significantly_worse, failed, budget, does_not_fit.")
    reason: str


class RungPlan(Strict):
    """What to run next, or why the sweep is done."""

    done: bool
    reason: str
    rung: Rung | None = None
    trials: list[str] = Field(default_factory=list, description="Trial ids to run at this rung.")
    stops: list[Stop] = Field(default_factory=list, description="Every trial stopped so far, in order.")
    spent_gpu_hours: float = 0.0
    budget_gpu_hours: float | None = None
    estimate_gpu_hours: float = Field(default=0.0, description="Estimated cost of this rung.")
    spent_by_rung: dict[int, float] = Field(default_factory=dict, description="GPU-hours each rung spent so far.")


class Observed(Strict):
    """What the records say of one trial, rung by rung."""

    samples: dict[int, list[float]] = Field(default_factory=dict, description="Rung -> primary-profile total tok/s.")
    ran: list[int] = Field(default_factory=list, description="Rungs it was run at (with or without a result).")
    failed: dict[int, str] = Field(default_factory=dict, description="Rung -> why it gave no usable sample.")
    wall_s: dict[int, float] = Field(default_factory=dict, description="Rung -> seconds its job held its slot.")
    run_s: dict[int, dict[str, list[float]]] = Field(
        default_factory=dict, description="Rung -> the rung's profile name -> wall seconds of each run.")
    gpus: int = Field(default=0, description="GPUs the trial holds.")

    def gpu_hours(self, rung: int) -> float:
        return self.wall_s.get(rung, 0.0) * max(self.gpus, 1) / 3600


class Priors(Strict):
    """Durations assumed before anything was measured (the grid estimate's: farm/study/grid.py)."""

    start_s: float = Field(description="Seconds from launch to ready, plus farm's own per trial.")
    run_s: dict[str, float] = Field(description="Study profile -> seconds of one full-length run, without the overhead.")
    full_requests: dict[str, int] = Field(description="Study profile -> its requests.")
    run_overhead_s: float = Field(default=15.0, description="Seconds of each run beyond the benchmark (client start, report).")


def rung_profile(profile: str, rung: Rung) -> str:
    return profile if rung.last else f"{profile}{RUNG_MARK}{rung.index}"


def study_profile(name: str) -> str:
    """The study profile a rung's profile name shortens."""
    return name.split(RUNG_MARK, 1)[0]


def rung_count(n_trials: int, eta: int = ETA, max_rungs: int = MAX_RUNGS) -> int:
    """1 + floor(log_eta(n)) rungs, at least 2 when there is anything to choose between."""
    if n_trials <= 1:
        return 1
    return max(2, min(max_rungs, 1 + int(math.floor(math.log(n_trials) / math.log(eta) + 1e-9))))


def build_rungs(profiles: Sequence[str], primary: str, requests: Mapping[str, int], n_trials: int, *,
                final_repeats: int = FINAL_REPEATS, eta: int = ETA, max_rungs: int = MAX_RUNGS,
                min_requests: int = MIN_REQUESTS) -> list[Rung]:
    """The rungs of a sweep over `n_trials` trials: rung r of R runs `requests / eta^(R-r)` requests
    (at least `min_requests`), on the primary profile first and on more profiles rung by rung;
    the last rung runs every profile in full, `final_repeats` times."""
    count = rung_count(n_trials, eta, max_rungs)
    ordered = [primary] + [p for p in profiles if p != primary]
    alpha = FAMILY_ALPHA / count
    rungs = []
    for r in range(1, count + 1):
        last = r == count
        k = len(ordered) if last else max(1, math.ceil(len(ordered) * (r - 1) / (count - 1))) if r > 1 else 1
        chosen = ordered[:k]
        shrink = eta ** (count - r)
        placeholder = Rung(index=r, profiles={}, requests={}, repeats=1, alpha=alpha, primary=primary, last=last)
        names = {rung_profile(p, placeholder): p for p in chosen}
        reqs = {n: (requests[p] if last else max(min(min_requests, requests[p]), int(round(requests[p] / shrink))))
                for n, p in names.items()}
        rungs.append(placeholder.model_copy(update={
            "profiles": names, "requests": reqs, "repeats": max(final_repeats, RUNG_REPEATS) if last else RUNG_REPEATS,
            "primary": rung_profile(primary, placeholder)}))
    return rungs


# --------------------------------------------------------------------------------------
# who goes on


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def judge_rung(samples: Mapping[str, Sequence[float]], failed: Mapping[str, str], rung: Rung) -> tuple[list[str], list[Stop]]:
    """Survivors (best mean first) and stops of one rung: a trial stops only when the leader's
    lead over it is significant at the rung's alpha, or when it gave no usable sample."""
    stops = [Stop(trial=t, rung=rung.index, kind="failed", reason=f"rung {rung.index}: {why}")
             for t, why in failed.items() if t not in samples]
    usable = {t: list(s) for t, s in samples.items() if s}
    if not usable:
        return [], stops
    order = sorted(usable, key=lambda t: -_mean(usable[t]))
    leader = order[0]
    survivors = [leader]
    for t in order[1:]:
        d = relative_difference(usable[leader], usable[t], confidence=1 - rung.alpha)
        if d.significant and (d.relative or 0) > 0:
            ci = "" if d.ci_low is None else f" [{d.ci_low * 100:+.1f} %, {d.ci_high * 100:+.1f} %]"
            stops.append(Stop(trial=t, rung=rung.index, kind="significantly_worse",
                              reason=f"rung {rung.index}: significantly worse than the leader {leader} at alpha "
                                     f"{rung.alpha:.3g}: the leader is {d.relative * 100:+.1f} %{ci} ahead "
                                     f"(p = {d.p_value:.2g}, {len(usable[leader])} vs {len(usable[t])} runs)"))
        else:
            survivors.append(t)
    return survivors, stops


# --------------------------------------------------------------------------------------
# what a rung costs


def rung_cost(rung: Rung, gpus: int, rungs: Sequence[Rung], observed: Mapping[str, Observed], priors: Priors,
              trial: str | None = None) -> float:
    """Estimated GPU-hours of one trial at `rung`, from what the rungs before it measured (a run is
    the prior overhead plus seconds per request; never less than a shorter rung's run took), else
    from the priors. A trial's own earlier rungs speak for it (a slow configuration is slow at
    every length); one without them is priced like the slowest that has."""
    before = {r.index: r for r in rungs if r.index < rung.index}
    own = observed.get(trial) if trial is not None else None
    if own is not None and any(i in before for i in own.run_s):
        observed = {trial: own}
    per_request: dict[str, list[float]] = {}
    shortest: dict[str, list[float]] = {}
    starts: list[float] = []
    for obs in observed.values():
        for idx, runs in obs.run_s.items():
            if idx not in before:
                continue
            total = 0.0
            for name, secs in runs.items():
                req = before[idx].requests.get(name)
                total += sum(secs)
                if req:
                    per_request.setdefault(study_profile(name), []).extend(
                        max(0.0, s - priors.run_overhead_s) / req for s in secs)
                    shortest.setdefault(study_profile(name), []).extend(secs)
            if idx in obs.wall_s:
                starts.append(max(0.0, obs.wall_s[idx] - total))
    start = max(starts) if starts else priors.start_s
    seconds = start
    for name, profile in rung.profiles.items():
        req = rung.requests[name]
        if per_request.get(profile):
            one = max(priors.run_overhead_s + max(per_request[profile]) * req, max(shortest[profile]))
        else:
            one = priors.run_overhead_s + priors.run_s.get(profile, 600.0) * req / max(priors.full_requests.get(profile, req), 1)
        seconds += rung.repeats * one
    return seconds * max(gpus, 1) / 3600


# --------------------------------------------------------------------------------------
# the plan


def _affordable(order: Sequence[str], cost: Mapping[str, float], allowance: float) -> list[str]:
    chosen, total = [], 0.0
    for t in order:
        if total + cost[t] > allowance + 1e-12:
            break
        chosen.append(t)
        total += cost[t]
    return chosen


def next_rung(rungs: Sequence[Rung], trials: Sequence[str], observed: Mapping[str, Observed], *,
              priors: Priors, budget_gpu_hours: float | None, gpus: Mapping[str, int] | None = None,
              pruned: Mapping[str, str] | None = None) -> RungPlan:
    """The next rung to run (and its trials), or done, from what was observed so far.

    `trials`: the grid's trial ids in grid order; `pruned`: trials the memory-fit model ruled out
    (trial -> reason). Each rung's admission is decided from what the rungs before it measured
    only, so a sweep stopped mid-rung and resumed admits the same trials."""
    pruned = dict(pruned or {})
    gpus = dict(gpus or {})
    stops = [Stop(trial=t, rung=0, kind="does_not_fit", reason=f"{PRUNED_MARK}{why}")
             for t, why in pruned.items()]
    alive = [t for t in trials if t not in pruned]
    obs = {t: observed.get(t, Observed(gpus=gpus.get(t, 0))) for t in trials}
    spent_by: dict[int, float] = {}
    for o in obs.values():
        for r in o.wall_s:
            spent_by[r] = spent_by.get(r, 0.0) + o.gpu_hours(r)
    spent = sum(spent_by.values())

    def plan(**kw) -> RungPlan:
        return RungPlan(stops=stops, spent_gpu_hours=round(spent, 6), budget_gpu_hours=budget_gpu_hours,
                        spent_by_rung={r: round(h, 6) for r, h in sorted(spent_by.items())}, **kw)

    for i, rung in enumerate(rungs):
        spent_before = sum(h for r, h in spent_by.items() if r < rung.index)
        left = math.inf if budget_gpu_hours is None else budget_gpu_hours - spent_before
        costs = {t: rung_cost(rung, obs[t].gpus or gpus.get(t, 0), rungs, obs, priors, t) for t in alive}
        if rung.last or i == len(rungs) - 1:
            allowance = left
        elif i == 0:  # every trial gets rung 1 if it can, keeping enough for one trial's last rung
            allowance = left - min(rung_cost(rungs[-1], gpus.get(t, 0), rungs, {}, priors) for t in alive) if alive else left
        else:
            allowance = left / (len(rungs) - i)
        admitted = _affordable(alive, costs, allowance)
        stops += [Stop(trial=t, rung=rung.index - 1, kind="budget",
                       reason=f"budget: rung {rung.index}'s share ({allowance:.3g} of {left:.3g} GPU-hours left) pays "
                              f"for {len(admitted)} of {len(alive)} trial(s) still in the race; this one ranked below them "
                              f"by mean (not shown to be worse)")
                  for t in alive if t not in admitted]
        if not admitted:
            return plan(done=True, reason=f"budget: {left:.3g} GPU-hours left, rung {rung.index} of the leading trial "
                                          f"costs {costs[alive[0]]:.3g}" if alive else "no trial left")
        todo = [t for t in admitted if rung.index not in obs[t].ran]
        if todo:
            what = ", ".join(f"{p} x{rung.requests[p]} requests" for p in rung.profiles)
            return plan(done=False, rung=rung, trials=todo, estimate_gpu_hours=round(sum(costs[t] for t in todo), 6),
                        reason=f"rung {rung.index} of {len(rungs)}: {len(todo)} trial(s) on {what}, "
                               f"{rung.repeats} repeat(s) each")
        if rung.last:
            return plan(done=True, reason=f"last rung done: {len(admitted)} trial(s) measured on every profile")
        samples = {t: obs[t].samples.get(rung.index, []) for t in admitted}
        failed = {t: obs[t].failed.get(rung.index, "no usable run") for t in admitted if not samples[t]}
        alive, rung_stops = judge_rung({t: s for t, s in samples.items() if s}, failed, rung)
        stops += rung_stops
        if not alive:
            return plan(done=True, reason=f"rung {rung.index} left no trial with a usable run")
    return plan(done=True, reason="every rung done")


# --------------------------------------------------------------------------------------
# from stored results, and into them


WALL_KEY = "halving_wall_s"   # TrialResult.engine_reported: rung -> seconds that rung's job held its slot


def rung_study(study: Study, rungs: Sequence[Rung]) -> Study:
    """The study with each rung's shortened profiles added (`<profile>.rung<N>`), so that records,
    selection and the report know the profiles the early rungs ran."""
    extra = {}
    for rung in rungs:
        if rung.last:
            continue
        for name, profile in rung.profiles.items():
            spec = study.profiles[profile]
            # A rung starts its trials' engines again: its runs warm up as the profile's do (unset: one
            # round at the profile's concurrency, capped at the rung's requests by ProfileSpec.warmup_count).
            warm = None if spec.warmup_requests is None else min(spec.warmup_requests, rung.requests[name])
            extra[name] = spec.model_copy(update={
                "requests": rung.requests[name], "warmup_requests": warm,
                "description": f"rung {rung.index} of a halving sweep: {profile} at {rung.requests[name]} requests"})
    return study.model_copy(update={"profiles": {**study.profiles, **extra}})


def study_rungs(study: Study, grid: str, n_trials: int) -> list[Rung]:
    # A study that already carries the rungs' profiles (rung_study) plans the same rungs.
    profiles = [p for p in study.grid_profiles(grid) if RUNG_MARK not in p]
    repeats = study.repeats if isinstance(study.repeats, int) else FINAL_REPEATS
    return build_rungs(profiles, study.grid_primary_profile(grid), {p: study.profiles[p].requests for p in profiles},
                       n_trials, final_repeats=max(repeats, FINAL_REPEATS))


def observe(results: Sequence[TrialResult], rungs: Sequence[Rung], min_success_rate: float = 0.0) -> dict[str, Observed]:
    """What each stored trial result says rung by rung (its runs carry the rung as `pass_index`)."""
    by_index = {r.index: r for r in rungs}
    out: dict[str, Observed] = {}
    for res in results:
        obs = Observed(gpus=res.trial.gpus)
        walls = {int(k): float(v) for k, v in (res.engine_reported.get(WALL_KEY) or {}).items()}
        if not walls and res.started_at is not None and res.finished_at is not None:
            walls = {1: res.finished_at - res.started_at}
        obs.wall_s = walls
        obs.ran = sorted(set(walls) | {r.pass_index for r in res.runs})
        for run in res.runs:
            rung = by_index.get(run.pass_index)
            if rung is None or run.profile not in rung.profiles:
                continue
            if run.started_at is not None and run.finished_at is not None:
                obs.run_s.setdefault(rung.index, {}).setdefault(run.profile, []).append(run.finished_at - run.started_at)
            if run.profile != rung.primary:
                continue
            ok = run.status.value == "ok" and run.metrics is not None and run.metrics.total_tps is not None
            if ok and (run.metrics.success_rate is None or run.metrics.success_rate >= min_success_rate):
                obs.samples.setdefault(rung.index, []).append(float(run.metrics.total_tps))
            else:
                obs.failed[rung.index] = run.reason or run.status.value
        for idx in obs.ran:
            if idx not in obs.samples and idx not in obs.failed:
                obs.failed[idx] = res.reason or res.status.value
        out[res.trial.id] = obs
    return out


def merge_rung(previous: TrialResult, new: TrialResult, rung: Rung) -> TrialResult:
    """One trial's result with a later rung's runs appended: repeats continue, each run carries the
    rung as its pass, the trial's profiles grow by the rung's, and the rung's wall time is kept
    (the GPU-hours the budget counts)."""
    offset = max((r.repeat for r in previous.runs), default=-1) + 1
    added = [r.model_copy(update={"repeat": offset + r.repeat, "pass_index": rung.index, "node": r.node or new.node,
                                  "node_id": r.node_id or new.node_id})
             for r in new.runs]
    walls = dict(previous.engine_reported.get(WALL_KEY) or {})
    if not walls and previous.started_at is not None and previous.finished_at is not None:
        walls["1"] = previous.finished_at - previous.started_at
    if new.started_at is not None and new.finished_at is not None:
        walls[str(rung.index)] = new.finished_at - new.started_at
    spans = previous.held_spans()
    if new.started_at is not None and new.finished_at is not None:
        spans.append(HeldSpan(pass_index=rung.index, started_at=new.started_at, finished_at=new.finished_at,
                              node=new.node, engine_reported=dict(new.engine_reported)))
    profiles = list(previous.trial.profiles) + [p for p in new.trial.profiles if p not in previous.trial.profiles]
    update = {"runs": previous.runs + added, "finished_at": new.finished_at or previous.finished_at, "spans": spans,
              "trial": previous.trial.model_copy(update={"profiles": profiles}),
              "engine_reported": {**previous.engine_reported, **new.engine_reported, WALL_KEY: walls}}
    if new.status.value != "ok":
        update.update(status=new.status, reason=f"rung {rung.index}: {new.reason or new.status.value}")
    elif previous.status.value != "ok":
        update.update(status=new.status, reason=None)
    return previous.model_copy(update=update)


def summary_lines(plan: RungPlan, labels: Mapping[str, str] | None = None) -> list[str]:
    """What each rung spent and why each trial stopped, for the terminal and the report."""
    labels = labels or {}
    budget = "no budget" if plan.budget_gpu_hours is None else f"budget {plan.budget_gpu_hours:g} GPU-hours"
    # A plan that is not done is a stored sweep stopped before its end: its reason is what would
    # run next, not what ran (the driver only ever records a done plan).
    reason = plan.reason if plan.done else f"not finished; next, on --resume: {plan.reason}"
    lines = [f"halving: {plan.spent_gpu_hours:.3f} GPU-hours spent ({budget}); {reason}"]
    for r, h in plan.spent_by_rung.items():
        lines.append(f"  rung {r}: {h:.3f} GPU-hours")
    for s in plan.stops:
        lines.append(f"  stopped {labels.get(s.trial, s.trial)}: {s.reason}")
    return lines


def report_plan(recomputed: RungPlan, recorded: RungPlan | None) -> RungPlan:
    """The plan the report of a stored sweep shows: the driver's own last one (`recorded`, the
    sweep's halving.json) where it saw every GPU-hour the stored results hold and the budget the
    sweep now has, since only it knows that a rung measured nothing; else `recomputed` from the
    stored results. A sweep interrupted before its end recorded no plan, and one that finished,
    was resumed (with a larger budget, say) and interrupted again left the earlier leg's behind."""
    if (recorded is not None and recorded.spent_by_rung == recomputed.spent_by_rung
            and recorded.budget_gpu_hours == recomputed.budget_gpu_hours):
        return recorded
    return recomputed


def recorded_pruned(plan: RungPlan) -> dict[str, str]:
    """Trial -> why the memory-fit model ruled it out, as the sweep decided it (where the models'
    config.json were; the machine that reads the sweep back may not have them)."""
    return {s.trial: s.reason.removeprefix(PRUNED_MARK) for s in plan.stops if s.kind == "does_not_fit"}


def study_priors(study: Study, grid: str, trials: Sequence[Trial]) -> Priors:
    """The grid estimate's durations (farm/study/grid.py): the seed's seconds per profile, else the
    profile's max_seconds; its per-run overhead; the slowest engine's start."""
    from farm.engines import get_engine
    from farm.study.grid import RUN_OVERHEAD_S, SEED_PROFILE_SECONDS

    profiles = [p for p in study.grid_profiles(grid) if RUNG_MARK not in p]
    run_s = {p: SEED_PROFILE_SECONDS.get(p, study.profiles[p].max_seconds or 600.0) for p in profiles}
    start = max((get_engine(t.engine).start_overhead_s for t in trials), default=30.0)
    return Priors(start_s=start, run_s=run_s, full_requests={p: study.profiles[p].requests for p in profiles},
                  run_overhead_s=RUN_OVERHEAD_S)


def plan_from_results(study: Study, grid: str, trials: Sequence[Trial], results: Sequence[TrialResult],
                      pruned: Mapping[str, str] | None = None) -> RungPlan:
    """Where a halving sweep stands, from its stored results: what the driver plans next (or done)."""
    ranked = [t for t in trials if not t.node_control_of]
    rungs = study_rungs(study, grid, len([t for t in ranked if t.id not in (pruned or {})]))
    observed = observe(results, rungs, study.min_success_rate)
    return next_rung(rungs, [t.id for t in ranked], observed, priors=study_priors(study, grid, ranked),
                     budget_gpu_hours=study.budget_gpu_hours, gpus={t.id: t.gpus for t in ranked}, pruned=pruned)


