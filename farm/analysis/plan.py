"""Planning a sweep's runs (pure): repeats, the baseline on every node, and `--repeats auto` passes.

Nothing here starts anything; the driver asks these functions what to run next and runs it.
Every decision is a function of what was measured (records), so a resumed sweep plans exactly
what an uninterrupted one would.

Repeats and drift
-----------------
A trial runs each profile `repeats` times on one engine, in a seeded shuffled order of
(profile, repeat) with the prefix cache reset before every run (actors/bench.py). The order
is seeded by the trial id (and, for a later pass, the pass: the job's `order_seed`), so it is
reproducible and differs between trials and passes.
Different trials need different engine processes, so their runs cannot be interleaved on one
engine; what guards against a node effect (a slower node, a noisy neighbour) is the baseline:
when the cluster has more than one node able to run trials, the baseline runs once more on each
of them as a *node control* (`<baseline id>@<node>`), and the report compares the baseline
across nodes.

`--repeats auto` and optional stopping
--------------------------------------
A first pass of `AUTO_FIRST_PASS` repeats, then, pass after pass, `AUTO_STEP` more repeats for
the leader and every trial whose comparison with the leader on the primary profile is still
undecided (neither a significant difference nor equivalent within the study's margin: see
farm/analysis/stats), until every decision is made, the run budget is spent or the planned looks
were taken. Looking at the data after every pass and stopping when it looks good inflates the
chance of a false decision; the looks therefore share the family's 0.05 by an O'Brien-Fleming-type
alpha-spending rule (farm/study/repeats.py, which says why): the planned looks are those the run
budget can buy (`auto_design`: at most `AUTO_MAX_PASSES`), each look is judged at its own nominal
level (a difference and an equivalence alike), strict at the first look and near 0.05 at the
last, and over all looks the chance of a false decision stays at most 5 %. The level is a
function of the runs' counts alone, so the plan, a resumed sweep and the report agree. The report
says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from farm.strict import Strict

from farm.analysis.records import Results
from farm.analysis.results import HeldSpan, Status, TrialResult
from farm.analysis.select import SelectionSettings
from farm.analysis.selection.models import auto_look, first_pass_runs
from farm.analysis.selection.comparisons import blocked_candidates, decision_table, step_decisions
from farm.analysis.selection.rules import Table
from farm.analysis.selection.models import DiffStat
from farm.analysis.stats import DEFAULT_MARGIN, Control, Decided, leader_decisions
# What `repeats` means and how node controls are named live with the study (the grid asks too);
# they are re-exported here, where the driver and the report look for them.
from farm.study.repeats import (AUTO_BUDGET_FACTOR, AUTO_FIRST_PASS, AUTO_MAX_PASSES, AUTO_STEP,  # noqa: F401
                                FAMILY_ALPHA, alpha_for, auto_design, auto_looks, first_pass_repeats, is_auto,
                                look_alphas, parse_repeats)
from farm.study.spec import Study
from farm.study.trial import NODE_MARK, Trial, control_of, node_control_id  # noqa: F401

AUTO_MAX_REPEATS = 30      # no trial gets more repeats than this on any profile


_Strict = Strict  # farm/strict.py: the one strict base


# --------------------------------------------------------------------------------------
# the baseline on every node


class NodeSlot(_Strict):
    """A cluster node as planning sees it."""

    node_id: str = Field(description="Ray node id.")
    name: str = Field(description="Short unique name used in trial ids (hostname, or hostname plus id prefix).")
    gpus: float = Field(default=0, description="GPUs the node declares.")
    cpus: float = Field(default=0, description="CPUs the node declares.")
    accelerators: list[str] = Field(default_factory=list, description="GPU models it declares (Ray accelerator_type:X).")


def node_names(nodes: Sequence[Mapping[str, Any]]) -> list[NodeSlot]:
    """`ray.nodes()`-style entries (alive ones) -> NodeSlots with short unique names."""
    alive = [n for n in nodes if n.get("Alive", True)]
    hosts = [str(n.get("NodeManagerHostname") or n.get("NodeManagerAddress") or "node") for n in alive]
    out = []
    for n, host in zip(alive, hosts):
        node_id = str(n.get("NodeID", host))
        short = re.sub(r"[^A-Za-z0-9_.-]", "-", host.split(".")[0])[:24] or "node"
        name = short if hosts.count(host) == 1 else f"{short}-{node_id[:8]}"
        res = n.get("Resources", {}) or {}
        out.append(NodeSlot(node_id=node_id, name=name, gpus=float(res.get("GPU", 0)), cpus=float(res.get("CPU", 0)),
                            accelerators=sorted(k.split(":", 1)[1] for k in res if k.startswith("accelerator_type:"))))
    return out


def baseline_trial(study: "Study", trials: Sequence["Trial"]) -> "Trial | None":
    """The trial selection will treat as the baseline: the study's `baseline` (name or id), else the
    engine-default trial (required flags only) of the first engine, on its first model."""
    if study.baseline:
        return next((t for t in trials if study.baseline in (t.id, t.name)), None)
    models = [m.name for m in study.models.values()]
    for engine in study.engines:
        plain = [t for t in trials if t.engine == engine and not t.flags]
        plain.sort(key=lambda t: (models.index(t.model) if t.model in models else len(models), t.index))
        if plain:
            return plain[0]
    return None


def able_nodes(trial: "Trial", nodes: Sequence[NodeSlot], cpus_per_trial: float = 1,
               accelerator_type: str | None = None) -> list[NodeSlot]:
    """Nodes that can hold this trial: its GPUs on one node, of its GPU model when it names one."""
    return [n for n in nodes if n.cpus >= cpus_per_trial and n.gpus >= trial.gpus
            and not (trial.gpus and accelerator_type and accelerator_type not in n.accelerators)]


def node_baselines(baseline: "Trial | None", nodes: Sequence[NodeSlot], *, first_index: int,
                   cpus_per_trial: float = 1, accelerator_type: str | None = None) -> list[tuple["Trial", NodeSlot]]:
    """One extra run of the baseline pinned to each node able to run it, when there are several.

    Each copy is its own trial (`<id>@<node>`, named `<label>@<node>`) so that it is logged,
    resumed and reported on its own; selection never ranks it (its `node_control_of`).
    """
    if baseline is None:
        return []
    able = able_nodes(baseline, nodes, cpus_per_trial, accelerator_type)
    if len(able) < 2:
        return []
    return [(baseline.model_copy(update={"id": node_control_id(baseline.id, n.name),
                                         "name": f"{baseline.label}{NODE_MARK}{n.name}",
                                         "node_control_of": baseline.id, "index": first_index + i}), n)
            for i, n in enumerate(able)]


# --------------------------------------------------------------------------------------
# `--repeats auto`


class PassPlan(_Strict):
    """What the next pass of `--repeats auto` runs, or why there is none."""

    done: bool = Field(description="True: no further pass.")
    reason: str = Field(description="Why this plan (or why the loop stops).")
    trials: list[str] = Field(default_factory=list, description="Trial ids to rerun, leader first.")
    repeats: int = Field(default=0, description="Repeats each of them gets in this pass.")
    runs: int = Field(default=0, description="Benchmark runs this pass costs.")
    pass_index: int = Field(default=1, description="Number of the pass this plan is for (2 = the first extra pass).")
    spent: int = Field(default=0, description="Benchmark runs made before this pass.")
    budget: int = Field(default=0, description="Benchmark runs the sweep may make in all.")


def default_budget(max_runs: int | None, first_pass_runs: int) -> int:
    return max_runs if max_runs is not None else AUTO_BUDGET_FACTOR * first_pass_runs


def _named(k: str, names: Mapping[str, str] | None) -> str:
    return (names or {}).get(k, k)


def _open_text(leader: str, open_: Sequence[str], decisions: Mapping[str, Decided],
               names: Mapping[str, str] | None = None) -> str:
    """The decisions still open, in a few words each: 'b vs a: +1.2 %, ~4 more runs each'."""
    parts = []
    for k in open_:
        d = decisions[k]
        low, high = d.eq_low, d.eq_high
        where = f"{(1 - 2 * d.alpha) * 100:g} % interval [{low * 100:+.1f}, {high * 100:+.1f}] %" \
            if low is not None and high is not None else "no interval yet"
        more = (f"~{d.more_runs} more run{'' if d.more_runs == 1 else 's'} each would decide it"
                if d.more_runs is not None else "no number of runs would decide it at this noise")
        parts.append(f"{_named(leader, names)} vs {_named(k, names)} ({where}; {more})")
    return "; ".join(parts)


def _made_text(leader: str, decisions: Mapping[str, Decided], names: Mapping[str, str] | None = None) -> str:
    counts: dict[str, list[str]] = {}
    for k, d in decisions.items():
        counts.setdefault(d.decision, []).append(_named(k, names))
    words = {"better": "below it", "worse": "above it", "equivalent": "equivalent to it"}
    return "; ".join(f"{', '.join(v)} {words[dec]}" for dec, v in counts.items() if dec in words)


def next_pass(samples: Mapping[str, Sequence[float]], *, cost_per_repeat: Mapping[str, int], passes_done: int,
              spent: int, budget: int, step: int = AUTO_STEP, alpha: float | None = None,
              max_passes: int = AUTO_MAX_PASSES, max_repeats: int = AUTO_MAX_REPEATS,
              margin: float = DEFAULT_MARGIN, names: Mapping[str, str] | None = None,
              blocks: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
              controls: Sequence[Control] = ()) -> PassPlan:
    """The next pass of `--repeats auto` from the eligible candidates' samples on the primary profile.

    Every trial's comparison with the leader is a decision (`leader_decisions`: better, worse,
    equivalent within `margin`, or undecided, Holm over all of them; within the machines two
    trials share, or through a control, where `blocks` give each trial's runs by machine, as the
    report compares them) at `alpha`: by default the
    level of look `passes_done` of `max_passes` planned looks (`alpha_for`). A trial
    whose decision is made needs no more runs; the leader and every undecided trial get `step`
    more, best mean first, as far as the budget goes. The loop stops when every decision is
    made, after `max_passes` looks, or when the budget cannot pay for the leader's next repeats;
    its reason says which decisions are still open.
    """
    base = dict(pass_index=passes_done + 1, spent=spent, budget=budget)
    if alpha is None:
        alpha = alpha_for("auto", passes_done, max_passes)
    level = f"\u03b1 {alpha:.3g} at look {min(passes_done, max_passes)} of {max_passes}"
    finite = {k: [float(v) for v in s if v is not None and math.isfinite(float(v))] for k, s in samples.items()}
    finite = {k: v for k, v in finite.items() if v}
    if len(finite) < 2:
        return PassPlan(done=True, reason=f"{len(finite)} eligible trial(s): nothing to decide", **base)
    blocked = {k: blocks[k] for k in finite if k in blocks} if blocks else None
    leader, decisions = leader_decisions(finite, alpha=alpha, margin=margin,
                                         blocks=blocked if blocked and len(blocked) == len(finite) else None,
                                         controls=controls)
    mean = {k: sum(v) / len(v) for k, v in finite.items()}
    open_ = sorted((k for k, d in decisions.items() if not d.decided), key=lambda k: -mean[k])
    lead = _named(leader, names)
    if not open_:
        return PassPlan(done=True, reason=f"every decision made ({level}, margin \u00b1{margin * 100:g} %): "
                                          f"leader {lead}; {_made_text(leader, decisions, names)}", **base)
    still = f"still open: {_open_text(leader, open_, decisions, names)}"
    leader_cost = step * max(1, int(cost_per_repeat.get(leader, 1)))
    if passes_done >= max_passes and spent + leader_cost <= budget:
        return PassPlan(done=True, reason=f"{passes_done} looks taken, the most this sweep's budget plans ({max_passes}); {still}",
                        **base)
    if passes_done >= max_passes:  # the budget plans no further look because it cannot pay for one: say that
        return PassPlan(done=True, reason=f"run budget spent: {spent} of {budget} benchmark runs made, the leader's next "
                                          f"{step} repeats cost {leader_cost}; {still}", **base)
    chosen, runs = [], 0
    for k in [leader, *open_]:
        if len(finite[k]) + step > max_repeats:
            continue
        cost = step * max(1, int(cost_per_repeat.get(k, 1)))
        if spent + runs + cost > budget:
            if k == leader:
                break
            continue
        chosen.append(k)
        runs += cost
    if leader not in chosen:
        why = (f"the leader {lead} has {len(finite[leader])} repeats, the most a trial gets ({max_repeats})"
               if len(finite[leader]) + step > max_repeats else
               f"run budget spent: {spent} of {budget} benchmark runs made, the leader's next {step} repeats "
               f"cost {step * max(1, int(cost_per_repeat.get(leader, 1)))}")
        return PassPlan(done=True, reason=f"{why}; {still}", **base)
    if len(chosen) < 2:
        return PassPlan(done=True, reason=f"no undecided trial fits the budget or the repeat limit beside the leader "
                                          f"{lead}; {still}", **base)
    return PassPlan(done=False, trials=chosen, repeats=step, runs=runs,
                    reason=f"{len(open_)} decision(s) open ({level}, margin \u00b1{margin * 100:g} %): "
                           f"{_open_text(leader, open_, decisions, names)}; {step} more repeats for "
                           f"{', '.join(_named(k, names) for k in chosen)}", **base)


def _step_word(d: DiffStat, names: Mapping[str, str] | None) -> str:
    return f"{_named(d.a, names)} vs {_named(d.b, names)}"


def _open_step_text(open_: Sequence[DiffStat], alpha: float, names: Mapping[str, str] | None) -> str:
    parts = []
    for d in open_:
        where = (f"{(1 - 2 * alpha) * 100:g} % interval [{d.eq_low_pct:+.1f}, {d.eq_high_pct:+.1f}] %"
                 if d.eq_low_pct is not None and d.eq_high_pct is not None else "no interval yet")
        more = (f"~{d.more_runs} more run{'' if d.more_runs == 1 else 's'} each would decide it"
                if d.more_runs is not None else
                "no machine ran both: runs of both on one machine would let them be compared"
                if d.machines == "no_shared_control" else "no number of runs would decide it at this noise")
        parts.append(f"{_step_word(d, names)} ({where}; {more})")
    return "; ".join(parts)


def next_step_pass(decisions: Sequence[DiffStat], *, repeats_of: Mapping[str, int], passes_done: int, spent: int,
                   budget: int, step: int = AUTO_STEP, alpha: float, max_passes: int = AUTO_MAX_PASSES,
                   max_repeats: int = AUTO_MAX_REPEATS, margin: float = DEFAULT_MARGIN,
                   names: Mapping[str, str] | None = None, unmeasured: Sequence[str] = ()) -> PassPlan:
    """The next pass of `--repeats auto` in a study of ordered steps: the decisions are the steps,
    each against the step it builds on (`step_decisions`, as the report judges them), not every
    trial against the leader. A step that is a difference or an equivalence needs no more runs;
    both trials of every undecided step get `step` more, in the grid's order, as far as the budget
    and the repeat limit go. `repeats_of`: each trial's runs so far; `unmeasured`: steps with no
    decision possible yet (a side not measured), named in the reason."""
    base = dict(pass_index=passes_done + 1, spent=spent, budget=budget)
    level = f"\u03b1 {alpha:.3g} at look {min(passes_done, max_passes)} of {max_passes}"
    later = f"; not measured yet: {', '.join(unmeasured)}" if unmeasured else ""
    if not decisions:
        return PassPlan(done=True, reason=f"no step has both its trial and the one it builds on measured: nothing "
                                          f"to decide{later}", **base)
    open_ = [d for d in decisions if d.decision in (None, "undecided")]
    if not open_:
        words = {"better": "better than", "worse": "worse than", "equivalent": "equivalent to"}
        made = "; ".join(f"{_named(d.a, names)} {words[d.decision]} {_named(d.b, names)}" for d in decisions)
        return PassPlan(done=True, reason=f"every step decided ({level}, margin \u00b1{margin * 100:g} %): {made}{later}",
                        **base)
    still = f"still open: {_open_step_text(open_, alpha, names)}{later}"
    spent_text = (f"run budget spent: {spent} of {budget} benchmark runs made, an undecided step's next {step} "
                  f"repeats of both its trials cost up to {2 * step}")
    if passes_done >= max_passes:  # no further look: for want of budget where that is why
        why = spent_text if spent + 2 * step > budget else \
            f"{passes_done} looks taken, the most this sweep's budget plans ({max_passes})"
        return PassPlan(done=True, reason=f"{why}; {still}", **base)
    chosen: list[str] = []
    for d in open_:
        need = [t for t in (d.a, d.b) if t not in chosen]
        if any(repeats_of.get(t, 0) + step > max_repeats for t in need):
            continue
        if spent + step * (len(chosen) + len(need)) > budget:
            continue
        chosen += need
    if not chosen:
        tight = all(any(repeats_of.get(t, 0) + step > max_repeats for t in (d.a, d.b)) for d in open_)
        why = (f"every undecided step has a trial with the most repeats a trial gets ({max_repeats})" if tight else
               spent_text)
        return PassPlan(done=True, reason=f"{why}; {still}", **base)
    return PassPlan(done=False, trials=chosen, repeats=step, runs=step * len(chosen),
                    reason=f"{len(open_)} step(s) open ({level}, margin \u00b1{margin * 100:g} %): "
                           f"{_open_step_text(open_, alpha, names)}{later}; {step} more repeats for "
                           f"{', '.join(_named(k, names) for k in chosen)}", **base)


def auto_samples(results: "Results", settings: "SelectionSettings", table: Table | None = None
                 ) -> tuple[dict[str, list[float]], dict[str, dict[str, list[float]]], list[Control]]:
    """Eligible candidates' samples on the primary profile (node controls left out), their runs by
    machine and the controls that bridge machines (`blocked_candidates`): the input of `next_pass`.
    `table`: the decision table, where the caller built it already."""
    info = results.profiles.get(settings.primary_profile)
    if info is not None and info.capacity is not None:
        return {}, {}, []  # a capacity search runs once per trial: no repeat separates it further
    metric = results.deciding_metric  # the number the study decides by, as the report ranks
    return blocked_candidates(table or decision_table(results, settings, metric), settings, metric)


# The level of every look before the alpha-spending rule (0.05 / 5 looks): sweeps stored then
# recorded none, and `unfinished_pass` recognises the passes it planned.
LEGACY_AUTO_ALPHA = 0.01


def pass_from_stored(stored: Sequence["TrialResult"], study: Study, grid: str, sweep_id: str, *,
                     before: int | None = None, rule: str = "current") -> PassPlan:
    """The next pass of `--repeats auto` from a sweep's stored trial results. `before=N` plans from
    the runs made before pass N alone: what pass N was planned to run, recomputed (the plan is a
    function of those runs and the study, so it comes out as it did then). `rule`: "current" (an
    ordered grid's steps, else every trial against the leader by machine); the rules passes were
    planned by before, for a stored pass they planned: "pooled" (every trial against the leader,
    runs of all machines pooled: until 2026-12-07) and "legacy" (that, at `LEGACY_AUTO_ALPHA` at
    every look, at most `AUTO_MAX_PASSES` looks: before the alpha-spending rule)."""
    from farm.analysis.records import records_from_trials  # records imports this module's neighbours
    from farm.analysis.select import settings_for
    from farm.errors import UserError

    if before is not None:
        stored = [r.model_copy(update={"runs": [x for x in r.runs if x.pass_index < before]}) for r in stored]
    records = records_from_trials(list(stored), study, grid=grid, sweep_id=sweep_id)
    try:
        settings = settings_for(records, study, grid=grid)
    except UserError as exc:  # e.g. no run on the primary profile: nothing to refine
        return PassPlan(done=True, reason=exc.reason)
    table = decision_table(records, settings, records.deciding_metric)  # built once for every decision below
    samples, blocks, controls = auto_samples(records, settings, table)
    runs = [run for r in stored for run in r.runs]
    first = sum(1 for run in runs if run.pass_index == 1)
    # The looks the budget plans, as selection's settings counted them for `settings.alpha` (the
    # level of the look these runs are at): the plan and the report judge alike.
    _, looks = auto_look(records, settings.primary_profile, study.max_runs,
                         first_pass_runs(study, grid, settings.primary_profile))
    names = {r.trial.id: r.trial.label for r in stored}
    common = dict(passes_done=max((run.pass_index for run in runs), default=1), spent=len(runs),
                  budget=default_budget(study.max_runs, first), margin=settings.equivalence_margin, names=names)
    if rule == "current" and samples and settings.steps and settings.step_grid == grid:
        # An ordered grid decides its steps (each against the one before), as its report does.
        rows = step_decisions(table, records, settings, records.deciding_metric)
        return next_step_pass([r.delta for r in rows if r.delta is not None],
                              repeats_of={k: len(v) for k, v in samples.items()}, alpha=settings.alpha,
                              max_passes=looks, unmeasured=[r.step for r in rows if r.trial is None], **common)
    # A later pass runs the primary profile alone (pass_trial): one run a repeat.
    if rule == "legacy":
        return next_pass(samples, cost_per_repeat={r.trial.id: 1 for r in stored}, alpha=LEGACY_AUTO_ALPHA,
                         max_passes=AUTO_MAX_PASSES, **common)
    if rule == "pooled":
        return next_pass(samples, cost_per_repeat={r.trial.id: 1 for r in stored}, alpha=settings.alpha,
                         max_passes=looks, **common)
    return next_pass(samples, cost_per_repeat={r.trial.id: 1 for r in stored}, alpha=settings.alpha,
                     max_passes=looks, blocks=blocks, controls=controls, **common)



def _rest_of(latest: int, planned: Sequence[str], have: set[str], every: Sequence["TrialResult"], *,
             repeats: int, budget: int) -> PassPlan | None:
    """Pass `latest`'s trials that have no run of it yet, as the plan that finishes it; None when none."""
    missing = [t for t in planned if t not in have]
    if not missing:
        return None
    names = {r.trial.id: r.trial.label for r in every}
    return PassPlan(done=False, trials=missing, repeats=repeats, runs=repeats * len(missing), pass_index=latest,
                    spent=sum(len(r.runs) for r in every), budget=budget,
                    reason=f"pass {latest} was stopped before {len(missing)} of its {len(planned)} trial(s) ran: "
                           f"{repeats} more repeats for {', '.join(names.get(t, t) for t in missing)} first")


def unfinished_pass(stored: Sequence["TrialResult"], study: Study, grid: str, sweep_id: str,
                    recorded: Mapping[int, Sequence[str]] | None = None) -> PassPlan | None:
    """The rest of the latest pass, when a lost machine (a GPU lease ending) stopped it after some of
    its trials: the trials its plan named that have no run of it yet. None when it was finished.

    Without this a resumed sweep would plan the next pass over the trials that did get their runs
    and leave the others with fewer, the opposite of what the pass was for."""
    latest = max((run.pass_index for r in stored for run in r.runs), default=1)
    if latest < 2:
        return None
    every = list(stored)
    have = {r.trial.id for r in stored if any(run.pass_index == latest for run in r.runs)}
    if recorded and latest in recorded:
        # the pass's plan as recorded when it started (`recorded`: farm/store/searches.py): what it
        # was to run, whatever budget this resume plans with
        first = sum(1 for r in stored for run in r.runs if run.pass_index == 1)
        return _rest_of(latest, recorded[latest], have, every, repeats=AUTO_STEP,
                        budget=default_budget(study.max_runs, first))
    # Not recorded (a sweep stored before passes were): the plan recomputed from the runs before it.
    # A trial first started after pass `latest` began (a later resume's new trial or control copy)
    # was no part of its plan: its first runs (pass 1 too) came after, and would otherwise make the
    # finished pass look stopped before that trial.
    began = [span.started_at for r in stored for span in r.held_spans() if span.pass_index == latest]
    if began:
        stored = [r for r in stored if r.started_at is None or r.started_at < min(began)]
    planned = pass_from_stored(stored, study, grid, sweep_id, before=latest)
    if planned.done or planned.pass_index != latest or set(planned.trials) <= have:
        return None
    # A sweep stored under an earlier rule ran the passes that rule planned (before the alpha-spending
    # rule the first look was less strict; before the step rule an ordered grid's trials were each
    # judged against the leader, machines pooled): a pass that ran exactly such a plan is finished.
    for rule in ("pooled", "legacy"):
        old = pass_from_stored(stored, study, grid, sweep_id, before=latest, rule=rule)
        if not old.done and old.pass_index == latest and set(old.trials) == have:
            return None
    return _rest_of(latest, planned.trials, have, every, repeats=planned.repeats, budget=planned.budget)


# --------------------------------------------------------------------------------------
# merging a later pass into its trial


def next_repeat(result: "TrialResult", profile: str | None = None) -> int:
    """The first repeat number a later pass of this trial uses on `profile` (on any, when None):
    repeats continue, never restart."""
    return max((r.repeat for r in result.runs if profile is None or r.profile == profile), default=-1) + 1


def pass_trial(trial: Trial, primary: str) -> Trial:
    """What a later pass of `--repeats auto` runs of a trial: the primary profile alone. The pass
    plan looks at nothing else, and on a GPU the other profiles' runs would cost minutes each for
    a decision they do not enter (its repeats there continue from the first pass's)."""
    return trial.model_copy(update={"profiles": [primary] if primary in trial.profiles else list(trial.profiles),
                                    "profile_repeats": {}})


def merge_pass(previous: "TrialResult", new: "TrialResult", pass_index: int) -> "TrialResult":
    """One trial's result with a later pass's runs appended (pure).

    The new runs continue the repeat numbers and carry their pass and node; a failed run of the
    later pass stays in the record (selection then counts it against the trial). The trial's
    status becomes the later pass's when that is worse than ok, so the failure is visible.
    """
    offset = {p: next_repeat(previous, p) for p in {r.profile for r in new.runs}}
    old = [r if r.node else r.model_copy(update={"node": previous.node, "node_id": previous.node_id})
           for r in previous.runs]
    added = [r.model_copy(update={"repeat": offset[r.profile] + r.repeat, "pass_index": pass_index,
                                  "node": r.node or new.node, "node_id": r.node_id or new.node_id})
             for r in new.runs]
    runs = sorted(old + added, key=lambda r: (previous.trial.profiles.index(r.profile)
                                              if r.profile in previous.trial.profiles else len(previous.trial.profiles),
                                              r.repeat))
    spans = previous.held_spans()
    if new.started_at is not None and new.finished_at is not None:
        spans.append(HeldSpan(pass_index=pass_index, started_at=new.started_at, finished_at=new.finished_at,
                              node=new.node, engine_reported=dict(new.engine_reported)))
    update = {"runs": runs, "finished_at": new.finished_at or previous.finished_at, "spans": spans}
    if previous.status == Status.ok and new.status != Status.ok:
        update.update(status=new.status, reason=f"pass {pass_index}: {new.reason or new.status.value}")
    return previous.model_copy(update=update)
