"""A guarded local search from the serve command a user runs today (pure).

Users arrive with a command, not a blank page, and ask whether a better one exists and how sure
farm is. The search starts there (the *incumbent*) and moves only on evidence:

- **Neighbourhood.** The grid's trials that differ from the incumbent in exactly one coordinate
  (a knob or a flag the grid varies, or the model variant): for a coordinate whose values are
  numbers, the next value each side; for any other, every value. And the incumbent's coordinates
  on each other engine of the grid. Trials raced before and not kept are not raced again.
- **Racing.** Each step runs the incumbent again beside its neighbours, one after the other on
  the same node, so each comparison is paired in time (the incumbent's own runs of the step are
  its sample); runs are short (the primary profile at a third of its requests, like halving's
  first rung), `STEP_REPEATS` each.
- **Moving.** A neighbour replaces the incumbent only when it is significantly better at the
  step's alpha *and* by at least the study's margin (`equivalence_margin`: the smallest
  difference that matters, the same one that makes two trials equivalent): every step judges at
  `FAMILY_ALPHA` with Holm over its neighbours (`step_alpha` says why not a split over the steps:
  the final comparison tests the claim afresh), each comparison decided on the ratio scale
  (farm/analysis/stats/verdict.py `decide`). When neighbours on several coordinates are so
  better, the best one becomes the incumbent and their combination (each of those coordinates at
  its winning value, where the grid has that trial) is raced in the next step, where it must
  itself win.
- **Stopping.** When every raced neighbour is proven not better by more than the margin (the
  upper end of its ratio's (1 - 2 alpha) interval below 1 + margin: converged, a claim the data
  makes), or when a neighbour is neither (undecided: the report says how many more runs each
  would decide it), or when the budget pays for no more racing (budget: it is the search's; the
  final comparison comes on top, and the dry run says what it costs); the report says which. A
  step the budget pays for only in part races the incumbent and the neighbours it pays for, in
  grid order, and names the others.
- **The answer.** The user's command against farm's pick on every profile of the grid with
  `FINAL_REPEATS` runs each. If nothing beat the start, that is the answer, said as such, with the
  nearest neighbours and their intervals.

Everything is recomputed from what was measured (runs carry their step as `pass_index`), so a
resumed sweep continues where the stored results say it stands.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from farm.analysis.halving import FINAL_REPEATS, MIN_REQUESTS, RUNG_MARK, Rung
# The models, what a step measured and how it is judged, and the search in words live beside this
# module; every name stays importable from here, where the report, the store and the driver read it.
from farm.analysis.local_search_measured import _ended_without_runs, _judge, blocks_of, pooled, samples_of
from farm.analysis.local_search_models import Judged, Neighbour, Repair, SearchPlan, Step, start_failure_text
from farm.analysis.local_search_text import ending, judged_text, path_lines  # noqa: F401  (re-exported)
from farm.analysis.results import Status, TrialResult
from farm.analysis.stats import relative_difference
from farm.analysis.stats.verdict import DEFAULT_MARGIN, holm
from farm.strict import Strict
from farm.study.repeats import FAMILY_ALPHA
from farm.study.trial import Trial

STEP_REPEATS = 5     # runs of each raced trial per step: short runs are cheap beside an engine start, and with 3 a 6 % lead over 2.6 % noise is not significant at a step's Holm-adjusted alpha (bench/search.py)
STEP_SHRINK = 3      # a step's runs are the primary profile at 1 / STEP_SHRINK of its requests
ENGINE_AXIS = "engine"
MODEL_AXIS = "model"


# --------------------------------------------------------------------------------------
# where each trial sits


def coordinates(trials: Sequence[Trial], knob_flags: Mapping[str, set[str]],
                knobs: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Trial id -> its coordinates: the model variant, its knobs (`knobs`: trial id -> the knobs
    that change what the engine is given, default: every knob), and its flags that no knob
    renders (`knob_flags`: trial id -> the flag names its knobs rendered). Flags every trial
    shares are left out: they are no axis; a knob a trial does not set is None (the default)."""
    raw: dict[str, dict[str, Any]] = {}
    for t in trials:
        c: dict[str, Any] = {MODEL_AXIS: t.model_key}
        c.update({f"knob:{k}": _canon(v) for k, v in (knobs[t.id] if knobs is not None else t.knobs).items()})
        rendered = knob_flags.get(t.id, set())
        c.update({f"--{k}": _canon(v) for k, v in t.flags.items() if k not in rendered})
        raw[t.id] = c
    keys = {k for c in raw.values() for k in c}
    varying = {k for k in keys if len({repr(c.get(k)) for c in raw.values()}) > 1}
    return {tid: {k: c.get(k) for k in sorted(varying)} for tid, c in raw.items()}


def _canon(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _canon(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_canon(v) for v in value)
    return value


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _ordered_values(axis: str, coords: Mapping[str, Mapping[str, Any]]) -> list[Any] | None:
    """The axis's values in order when they are numbers (None, "not set", sorts first: the
    engine's default); None for an axis of names or switches."""
    values = {c.get(axis) for c in coords.values()}
    numbers = [v for v in values if v is not None]
    if not numbers or not all(_number(v) for v in numbers):
        return None
    return ([None] if None in values else []) + sorted(numbers)


def neighbours(incumbent: str, trials: Sequence[Trial], coords: Mapping[str, Mapping[str, Any]]) -> list[Neighbour]:
    """The incumbent's neighbours among `trials` (see the module's docstring)."""
    by_id = {t.id: t for t in trials}
    me, here = by_id[incumbent], coords[incumbent]
    same_engine = {t.id: coords[t.id] for t in trials if t.engine == me.engine and not t.node_control_of}
    out: list[Neighbour] = []
    for tid, c in same_engine.items():
        if tid == incumbent:
            continue
        diff = [k for k in here.keys() | c.keys() if here.get(k) != c.get(k)]
        if len(diff) != 1:
            continue
        axis = diff[0]
        order = _ordered_values(axis, same_engine)
        if order is not None:
            i, j = order.index(here.get(axis)), order.index(c.get(axis))
            if abs(i - j) != 1:
                continue
        out.append(Neighbour(trial=tid, axis=axis, value=c.get(axis), was=here.get(axis)))
    for t in trials:
        if t.engine != me.engine and not t.node_control_of and coords[t.id] == here:
            out.append(Neighbour(trial=t.id, axis=ENGINE_AXIS, value=t.engine, was=me.engine))
    return sorted(out, key=lambda n: (n.axis, repr(n.value)))


def combination(incumbent: str, winners: Sequence[Neighbour], trials: Sequence[Trial],
                coords: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The grid's trial with each winner's coordinate at its value, the rest the incumbent's."""
    if len({w.axis for w in winners}) < 2:
        return None
    engine = next(t.engine for t in trials if t.id == incumbent)
    wanted = dict(coords[incumbent])
    for w in winners:
        if w.axis == ENGINE_AXIS:
            return None  # another engine is not a coordinate to combine
        wanted[w.axis] = w.value
    return next((t.id for t in trials if t.engine == engine and coords[t.id] == wanted), None)


# --------------------------------------------------------------------------------------
# steps


def step_alpha(index: int, alpha: float = FAMILY_ALPHA) -> float:
    """Every step judges at `alpha` (Holm over its neighbours). The claim farm makes, that its pick
    beats the user's command, is tested afresh by the final comparison on runs no step saw, at
    `alpha` with Holm over the profiles: a wrong move costs GPU time, never a claimed gain. A
    family-wise split over the steps (alpha / 2^k) was tried and stalled on a six-step climb,
    5/8 hits against 1/8 (bench/search.py, single_peak)."""
    return alpha


def step_rung(index: int, primary: str, requests: int) -> Rung:
    """Step `index`'s runs: the primary profile, shortened, `STEP_REPEATS` each. Every step runs
    the same shortened profile (named as halving's first rung); its runs carry the step as their pass."""
    short = max(min(MIN_REQUESTS, requests), int(round(requests / STEP_SHRINK)))
    name = f"{primary}{RUNG_MARK}1"
    return Rung(index=index, profiles={name: primary}, requests={name: short}, repeats=STEP_REPEATS,
                alpha=step_alpha(index), primary=name)


def final_rung(index: int, profiles: Sequence[str], primary: str, requests: Mapping[str, int]) -> Rung:
    """The final comparison: every profile of the grid in full, `FINAL_REPEATS` runs each."""
    return Rung(index=index, profiles={p: p for p in profiles}, requests={p: requests[p] for p in profiles},
                repeats=FINAL_REPEATS, alpha=FAMILY_ALPHA, primary=primary, last=True)


def _ran(results: Sequence[TrialResult], index: int) -> set[str]:
    return {r.trial.id for r in results if any(run.pass_index == index for run in r.runs)
            or any(s.pass_index == index for s in r.spans)}


def _held_gpu_hours(results: Sequence[TrialResult], index: int | None = None) -> float:
    total = 0.0
    for r in results:
        for span in r.held_spans():
            if index is None or span.pass_index == index:
                total += span.seconds * max(r.trial.gpus, 1) / 3600
    return total


def plan(start: str, trials: Sequence[Trial], coords: Mapping[str, Mapping[str, Any]],
         results: Sequence[TrialResult], *, primary: str, requests: Mapping[str, int], profiles: Sequence[str],
         budget_gpu_hours: float | None, trial_estimate_gpu_hours: Mapping[str, float],
         min_success_rate: float = 0.0, repairs: Sequence[Repair] = (), repair_start: bool = True,
         recorded_steps: Sequence[Step] = (), margin: float = DEFAULT_MARGIN) -> SearchPlan:
    """The search so far, replayed from `results`, and what to run next (see the module docstring).

    `trial_estimate_gpu_hours(kind)`: the cost of one trial's job in a step ("step") and in the
    final comparison ("final"), before anything measured it (the grid estimate's durations).
    `repairs`: trials raced in a repaired form, already in `trials` and `coords` under the repaired
    id; where the start is one of them, `start` is the user's and the search starts from the
    repair, or stops at once with why when `repair_start` is off. `recorded_steps`: the steps of the
    sweep's stored plan; a step it began is raced as it chose it there (see `_race`)."""
    by_id = {t.id: t for t in trials}
    given, fixed = start, next((r for r in repairs if r.trial == start), None)
    spent = _held_gpu_hours(results)
    if fixed is not None and not repair_start:
        return _start_fails(fixed, repairs, budget_gpu_hours, spent, results)
    if fixed is not None:
        start = fixed.repaired
    incumbent, raced = start, {start}
    steps: list[Step] = []
    pending_combination: str | None = None
    index = 1
    p = SearchPlan(start=start, incumbent=start, budget_gpu_hours=budget_gpu_hours, spent_gpu_hours=spent,
                   given_start=given if fixed is not None else None, repairs=list(repairs))
    stop, reason = None, ""
    while True:
        rung = step_rung(index, primary, requests[primary])
        nbrs = _step_neighbours(incumbent, trials, coords, raced, pending_combination)
        ordered = sorted(nbrs, key=lambda t: by_id[t].index)
        if not ordered:
            steps_done = f" (step {index})" if steps else ""
            stop, reason = "converged", f"the incumbent has no neighbour left to race{steps_done}"
            break
        # What the budget pays for: the incumbent and as many neighbours as fit (in grid order)
        # beside the final comparison, at what earlier steps cost (their own spend, not this one's,
        # so a step resumed midway races the same trials).
        spent_before = sum(_held_gpu_hours(results, s.index) for s in steps)
        per_trial = _per_trial_cost(results, [s.index for s in steps], trial_estimate_gpu_hours["step"])
        ordered, unraced, over_budget = _race(index, incumbent, ordered, nbrs, recorded_steps, by_id,
                                              budget_gpu_hours, spent_before, per_trial)
        if over_budget is not None:
            stop, reason = "budget", over_budget
            break
        race = [incumbent] + ordered
        step = Step(index=index, incumbent=incumbent, race=race, alpha=rung.alpha, combination=pending_combination,
                    unraced=unraced)
        ran = _ran(results, index)
        if incumbent in ran and not set(race) <= ran:
            # The incumbent runs first (farm/run/local_search.py): if it measured nothing usable, its
            # neighbours are not raced against it.
            usable = len(samples_of(results, rung, min_success_rate).get(incumbent, []))
            if usable < 2:
                steps.append(step.model_copy(update={"incumbent_runs": usable, "outcome": "failed"}))
                stop, reason = "failed", f"step {index}: the incumbent gave {usable} usable run(s){_why(results, incumbent)}"
                break
        if not set(race) <= ran:
            return _pending(p, steps, step, ran, rung, per_trial, results, min_success_rate)
        blocks = blocks_of(results, rung, min_success_rate)
        samples = pooled(blocks)
        step = step.model_copy(update={"incumbent_runs": len(samples.get(incumbent, [])),
                                       "judged": _judge(step, nbrs, samples, margin, blocks,
                                                        _ended_without_runs(results, race))})
        raced |= set(race)
        step, stop, reason, winners = _outcome(step, results, margin)
        if not winners:
            steps.append(step)
            break
        best = winners[0].neighbour.trial
        pending_combination = combination(incumbent, [w.neighbour for w in winners], trials, coords)
        if pending_combination in raced:
            pending_combination = None
        steps.append(step.model_copy(update={"outcome": "moved", "moved_to": best}))
        incumbent = best
        index += 1
    p = p.model_copy(update={"steps": steps, "incumbent": incumbent, "stop": stop})
    return _final(p, reason, results, profiles=profiles, primary=primary, requests=requests,
                  final_gpu_hours=trial_estimate_gpu_hours["final"])


def _start_fails(fixed: Repair, repairs: Sequence[Repair], budget_gpu_hours: float | None, spent: float,
                 results: Sequence[TrialResult]) -> SearchPlan:
    """The search stopped before its first step: the start does not start, and the study asks for no repair."""
    start = fixed.trial
    return _with_spend(SearchPlan(start=start, incumbent=start, repairs=list(repairs), done=True, stop="start_fails",
                                  budget_gpu_hours=budget_gpu_hours, spent_gpu_hours=spent,
                                  reason=f"your command {start_failure_text(fixed)}; the study asks for no repair "
                                         f"(repair_start: false), so the search stops here"), results)


def _step_neighbours(incumbent: str, trials: Sequence[Trial], coords: Mapping[str, Mapping[str, Any]],
                     raced: set[str], pending_combination: str | None) -> dict[str, Neighbour]:
    """The incumbent's neighbours not raced before, and the step before's combination of winners
    where it is none of them."""
    nbrs = {n.trial: n for n in neighbours(incumbent, trials, coords) if n.trial not in raced}
    if pending_combination and pending_combination not in nbrs and pending_combination != incumbent:
        axis = ", ".join(sorted({k for k in coords[incumbent] if coords[incumbent][k] != coords[pending_combination].get(k)}))
        nbrs[pending_combination] = Neighbour(trial=pending_combination, axis=axis or "combination",
                                              value="combined", was=None)
    return nbrs


def _race(index: int, incumbent: str, ordered: list[str], nbrs: Mapping[str, Neighbour],
          recorded_steps: Sequence[Step], by_id: Mapping[str, Trial], budget_gpu_hours: float | None,
          spent_before: float, per_trial: float) -> tuple[list[str], list[str], str | None]:
    """The neighbours step `index` races (in grid order) and those the budget leaves out; and where
    the budget pays for no step at all, why the search stops (else None)."""
    began = next((s for s in recorded_steps if s.index == index and s.incumbent == incumbent
                  and all(t in nbrs for t in s.race[1:])), None)
    if began is not None:
        # The sweep chose this step's race when it began it, with its machine's memory-fit model
        # (which trials cannot start there) and its code's repairs: a resume or a report on another
        # machine or version, where a trial the sweep ruled out looks raceable, races and shows
        # the same trials (on the H100's search, a report here put a bf16 trial in the race).
        return list(began.race[1:]), [t for t in began.unraced if t in by_id], None
    if budget_gpu_hours is None:
        return ordered, [], None
    fits = int((budget_gpu_hours - spent_before) / per_trial + 1e-9) if per_trial > 0 else len(ordered) + 1
    if fits < 2:
        return ordered, [], (f"step {index} (~{per_trial:.2f} GPU-hours a trial, at least 2) does not fit "
                             f"what is left of the {budget_gpu_hours:g} GPU-hour budget "
                             f"({spent_before:.2f} spent)")
    return ordered[:fits - 1], ordered[fits - 1:], None


def _pending(p: SearchPlan, steps: list[Step], step: Step, ran: set[str], rung: Rung, per_trial: float,
             results: Sequence[TrialResult], min_success_rate: float) -> SearchPlan:
    """A step not measured (or only in part): its trials still to run are the next jobs."""
    race, incumbent = step.race, step.incumbent
    todo = [t for t in race if t not in ran]
    estimate = per_trial * len(todo)
    measured = samples_of(results, rung, min_success_rate)
    nothing = {t: _why(results, t).removeprefix(" (").removesuffix(")") or "no usable run"
               for t in race if t in ran and t not in measured}
    steps.append(step.model_copy(update={"so_far": {t: measured[t] for t in race if t in measured},
                                         "measured_nothing": nothing,
                                         "incumbent_runs": len(measured.get(incumbent, []))}))
    left = f", {len(step.unraced)} left for want of budget" if step.unraced else ""
    p = p.model_copy(update={"steps": steps, "incumbent": incumbent, "rung": rung, "trials": todo,
                             "estimate_gpu_hours": estimate,
                             "reason": f"step {step.index}: {incumbent} against {len(race) - 1} neighbour(s){left}"})
    return _with_spend(p, results)


def _outcome(step: Step, results: Sequence[TrialResult],
             margin: float) -> tuple[Step, str | None, str, list[Judged]]:
    """A judged step's winners, best first, where the search moves; else the step with its outcome
    (failed, undecided, converged), why the search stops there and the reason it gives."""
    index, incumbent = step.index, step.incumbent
    if step.incumbent_runs < 2:
        return step.model_copy(update={"outcome": "failed"}), "failed", (
            f"step {index}: the incumbent gave {step.incumbent_runs} usable run(s){_why(results, incumbent)}"), []
    winners = sorted((j for j in step.judged if j.better), key=lambda j: -(j.relative_pct or 0))
    if winners:
        return step, None, "", winners
    m = f"{margin * 100:g} %"
    open_ = [j for j in step.judged if not j.better and not j.settled]
    if open_:
        # Neither a move nor a proof: said as such, with what more runs would buy, never "converged".
        known = [j.more_runs for j in open_ if j.more_runs is not None]
        more = f"; {max(known)} more run(s) each would decide {'it' if len(open_) == 1 else 'them'} at the current " \
               f"noise" if known and len(known) == len(open_) else ""
        return step.model_copy(update={"outcome": "undecided"}), "undecided", (
            f"step {index}: no raced neighbour of {incumbent} is significantly better by "
            f"{m}, but {len(open_)} cannot yet be told from it{more}"), []
    step = step.model_copy(update={"outcome": "converged"})
    if step.unraced:
        return step, "budget", (f"step {index}: no raced neighbour of {incumbent} is better by more than {m} "
                                f"(each proven), and {len(step.unraced)} were not raced for want of budget"), []
    return step, "converged", f"step {index}: no neighbour of {incumbent} is better by more than {m} (each proven)", []


def _final(p: SearchPlan, reason: str, results: Sequence[TrialResult], *, profiles: Sequence[str], primary: str,
           requests: Mapping[str, int], final_gpu_hours: float) -> SearchPlan:
    """The search over (`p`: its steps, its pick, why it stopped): the final comparison, the start
    against the pick on every profile, unless they are one."""
    start, incumbent = p.start, p.incumbent
    if incumbent == start:
        tail = {"failed": "", "undecided": "; the start stays until more runs tell"}.get(p.stop or "", "; nothing beat the start")
        return _with_spend(p.model_copy(update={"done": True, "reason": reason + tail}), results)
    final = final_rung(max(s.index for s in p.steps) + 1, profiles, primary, requests)
    ran = _ran(results, final.index)
    todo = [t for t in (start, incumbent) if t not in ran]
    if todo:
        estimate = final_gpu_hours * len(todo)
        return _with_spend(p.model_copy(update={"rung": final, "trials": todo, "final": True,
                                                "estimate_gpu_hours": estimate, "reason": reason + (
            f"; the final comparison: the start against {incumbent} on every profile")}), results)
    return _with_spend(p.model_copy(update={"done": True, "final": True, "rung": final, "reason": reason}), results)


def _why(results: Sequence[TrialResult], trial: str) -> str:
    """': <status>: <reason>' of a trial that ended without a measurement, for the stop's reason."""
    failed = [r for r in results if r.trial.id == trial and r.status != Status.ok]
    return f" ({failed[-1].status.value}: {failed[-1].reason})" if failed and failed[-1].reason else ""


def _per_trial_cost(results: Sequence[TrialResult], indexes: Sequence[int], prior: float) -> float:
    spans = [s.seconds * max(r.trial.gpus, 1) / 3600 for r in results for s in r.held_spans() if s.pass_index in indexes]
    return max(spans) if spans else prior


def _with_spend(p: SearchPlan, results: Sequence[TrialResult]) -> SearchPlan:
    final_index = p.rung.index if p.final and p.rung else math.inf
    by_phase = {"search": 0.0, "final": 0.0}
    for r in results:
        for span in r.held_spans():
            phase = "final" if span.pass_index >= final_index else "search"
            by_phase[phase] += span.seconds * max(r.trial.gpus, 1) / 3600
    return p.model_copy(update={"spent_by_phase": by_phase, "spent_gpu_hours": sum(by_phase.values())})


# --------------------------------------------------------------------------------------
# the answer: the user's command against farm's pick


class ProfileDelta(Strict):
    profile: str
    start_runs: int
    pick_runs: int
    start_mean: float | None = None
    pick_mean: float | None = None
    relative_pct: float | None = None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    p_holm: float | None = None
    significant: bool | None = None
    capacity_search: bool = Field(default=False, description="A capacity profile: its runs are a search over loads, "
                                  "compared by capacity (the report's capacity table), not by a mean throughput.")


def _searched(results: Sequence[TrialResult], index: int, profile: str) -> bool:
    return any(r.load is not None for res in results for r in res.runs if r.pass_index == index and r.profile == profile)


def final_comparison(p: SearchPlan, results: Sequence[TrialResult], confidence: float = 1 - FAMILY_ALPHA) -> list[ProfileDelta]:
    """Farm's pick against the start on each profile of the final comparison (Holm over the profiles)."""
    if not (p.final and p.rung is not None and p.incumbent != p.start):
        return []
    rows, tests = [], []
    for name in p.rung.profiles:
        if _searched(results, p.rung.index, name):
            # runs at different loads: their mean throughput compares nothing (nor enters Holm's family)
            rows.append(ProfileDelta(profile=name, start_runs=0, pick_runs=0, capacity_search=True))
            continue
        profile_rung = p.rung.model_copy(update={"primary": name})
        s = samples_of(results, profile_rung)
        a, b = s.get(p.incumbent, []), s.get(p.start, [])
        row = ProfileDelta(profile=name, start_runs=len(b), pick_runs=len(a),
                           start_mean=sum(b) / len(b) if b else None, pick_mean=sum(a) / len(a) if a else None)
        if len(a) >= 2 and len(b) >= 2:
            d = relative_difference(a, b, confidence=confidence)
            row = row.model_copy(update={"relative_pct": None if d.relative is None else d.relative * 100,
                                         "ci_low_pct": None if d.ci_low is None else d.ci_low * 100,
                                         "ci_high_pct": None if d.ci_high is None else d.ci_high * 100})
            tests.append((len(rows), d))
        elif a and b:
            row = row.model_copy(update={"relative_pct": (row.pick_mean / row.start_mean - 1) * 100})
        rows.append(row)
    adjusted = holm([d.p_value if d.p_value is not None else 1.0 for _, d in tests]) if tests else []
    for (i, d), ph in zip(tests, adjusted):
        rows[i] = rows[i].model_copy(update={"p_holm": ph, "significant": ph < 1 - confidence})
    return rows


