"""Decisions: Holm's correction, one comparison's decision (better, worse, equivalent within a margin, undecided),
the verdict over the leader's comparisons, and what more runs would buy."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import Field

from farm.analysis.stats.summary import Summary, Samples, _clean, _Model, summarize
from farm.analysis.stats.blocks import Blocked, Control, blocked_difference
from farm.analysis.stats.difference import Diff, relative_difference


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni step-down adjusted p-values, in the input's order.

    Sorted ascending, the i-th smallest (0-based) is multiplied by (m - i), made monotone
    non-decreasing along that order and capped at 1. Reject where adjusted < alpha: that controls
    the family-wise error rate at alpha.
    """
    p = np.asarray(list(p_values), dtype=float)
    if p.size == 0:
        return []
    if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError(f"p-values must be finite and in [0, 1], got {list(p_values)}")
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = p[order] * (m - np.arange(m))
    adjusted_sorted = np.minimum(np.maximum.accumulate(scaled), 1.0)
    out = np.empty(m)
    out[order] = adjusted_sorted
    return [float(v) for v in out]


# ---------------------------------------------------------------------------------------------
# One comparison's decision: better, worse, equivalent within the margin, or undecided

Decision = Literal["better", "worse", "equivalent", "undecided"]

# The default equivalence margin, the study's own (`equivalence_margin`, farm/study/spec.py): a ratio
# within [1/1.03, 1.03] counts as the same.
DEFAULT_MARGIN = 0.03
# How far "N more runs each would decide" looks ahead.
MAX_RUNS_EACH = 100


class Decided(_Model):
    """What one comparison (a against b) decides, on the ratio scale.

    - `better` / `worse`: a's ratio to b differs from 1 at the family's alpha (the Holm-adjusted
      p-value of Welch's test on the logs), in a's favour or against it;
    - `equivalent`: the (1 - 2 alpha) interval of the ratio lies inside [1/(1+m), 1+m] (TOST at
      alpha: both one-sided tests reject a ratio at or beyond the margin). The margin is symmetric
      on the log scale, so a is equivalent to b exactly when b is to a. A difference that is
      significant but proven smaller than the margin is `equivalent`: the margin is the study's
      statement of the smallest difference that matters;
    - `undecided`: neither; `runs_each` says at how many runs per side the current noise and the
      current difference would decide it.
    """

    decision: Decision
    margin: float = Field(description="Equivalence margin m (fraction): the same within [1/(1+m), 1+m].")
    alpha: float = Field(description="Significance level of the decision.")
    eq_low: float | None = Field(default=None, description="Lower end of the (1 - 2 alpha) interval of the ratio - 1.")
    eq_high: float | None = Field(default=None, description="Upper end of the (1 - 2 alpha) interval of the ratio - 1.")
    p_equivalent: float | None = Field(default=None, description="TOST p-value (the larger one-sided p); None if untestable.")
    runs_each: int | None = Field(default=None, description="Undecided: runs per side at which the current noise and "
                                  f"difference would decide it (up to {MAX_RUNS_EACH}); None when decided or when no "
                                  "such number exists (too noisy) or can be said.")
    more_runs: int | None = Field(default=None, description="Undecided: runs each side still needs to reach `runs_each`.")
    why: str = Field(description="The decision in words.")

    @property
    def decided(self) -> bool:
        return self.decision != "undecided"


def _pct1(x: float) -> str:
    return f"{x * 100:+.1f} %"


def decide(diff: Diff, *, p_adjusted: float | None, alpha: float, margin: float = DEFAULT_MARGIN,
           higher_is_better: bool = True, family: int = 1) -> Decided:
    """The decision of one comparison from its difference (method `log`) and its Holm-adjusted p.

    `family` is the number of comparisons Holm adjusts over: "N more runs" assumes the worst
    case of its correction (alpha / family) for a difference.
    """
    if not 0 < margin < 1:
        raise ValueError(f"margin must be between 0 and 1, got {margin}")
    base = dict(margin=margin, alpha=alpha)
    sig = p_adjusted is not None and p_adjusted < alpha

    def direction() -> Decision:
        up = (diff.relative or 0) > 0
        return "better" if up == higher_is_better else "worse"

    if diff.machines == "no_shared_control":
        # More runs of the same two trials on their own machines would never bridge them: only a control would.
        return Decided(decision="undecided", **base, why=f"undecided: {diff.machines_note}; a trial run on a machine of "
                       "each (the baseline, say) would let them be compared")
    if diff.cannot_tell or diff.p_value is None:
        fewest = min(diff.n_a, diff.n_b)
        more = max(0, 2 - fewest) if diff.mean_a is not None and diff.mean_b is not None else None
        return Decided(decision="undecided", **base, runs_each=2 if more else None, more_runs=more or None,
                       why=f"cannot tell: {diff.note}" if diff.note else "cannot tell")
    if diff.log_ratio is None:  # a linear-scale test (a sample <= 0): no equivalence on the ratio scale
        if sig:
            return Decided(decision=direction(), **base, why=f"significant ({diff.note})")
        return Decided(decision="undecided", **base, why=f"not significant, and no equivalence test ({diff.note})")
    from scipy import stats as _st  # seconds to import: only repeated runs get here

    d, se, bound = diff.log_ratio, diff.log_se or 0.0, math.log1p(margin)
    if se == 0:
        lo = hi = d
        p_eq = 0.0 if abs(d) < bound else 1.0
    else:
        half = float(_st.t.ppf(1 - alpha, diff.df)) * se
        lo, hi = d - half, d + half
        p_eq = float(max(_st.t.sf((d + bound) / se, diff.df), _st.t.cdf((d - bound) / se, diff.df)))
    interval = dict(eq_low=math.expm1(lo), eq_high=math.expm1(hi), p_equivalent=p_eq)
    shown = f"{(1 - 2 * alpha) * 100:g} % interval [{_pct1(math.expm1(lo))}, {_pct1(math.expm1(hi))}]"
    if -bound < lo and hi < bound:
        extra = ", a significant difference smaller than the margin" if sig else ""
        return Decided(decision="equivalent", **base, **interval,
                       why=f"equivalent within \u00b1{margin * 100:g} %: its {shown} lies inside the margin{extra}")
    if sig:
        return Decided(decision=direction(), **base, **interval,
                       why=f"{direction()}: {_pct1(diff.relative)}, Holm-adjusted p = {p_adjusted:.3g} < {alpha:g}")
    runs = _runs_to_decide(d, diff, alpha, bound, family)
    have = min(diff.n_a, diff.n_b)
    if runs is None:
        noise = math.sqrt(((diff.log_sd_a or 0) ** 2 + (diff.log_sd_b or 0) ** 2) / 2)
        tail = (f"no number of runs up to {MAX_RUNS_EACH} each would decide it at the current noise (a CV of about "
                f"{noise * 100:.1f} % a run)")
    else:
        more = runs - have
        tail = f"{more} more run{'' if more == 1 else 's'} each ({runs} each) would decide it at the current noise"
    return Decided(decision="undecided", **base, **interval, runs_each=runs, more_runs=None if runs is None else runs - have,
                   why=f"undecided: {_pct1(diff.relative)} is neither significant nor inside \u00b1{margin * 100:g} % "
                       f"({shown}); {tail}")


def _runs_to_decide(d: float, diff: Diff, alpha: float, bound: float, family: int) -> int | None:
    """Runs per side at which a difference `d` (log ratio) with the observed noise (the two sides'
    log standard deviations, pooled) would be significant at alpha / family, or its (1 - 2 alpha)
    interval inside the margin; None when no number up to MAX_RUNS_EACH would do."""
    from scipy import stats as _st

    var = ((diff.log_sd_a or 0) ** 2 + (diff.log_sd_b or 0) ** 2) / 2
    if var == 0:
        return None
    n = np.arange(max(diff.n_a, diff.n_b) + 1, MAX_RUNS_EACH + 1)
    if n.size == 0:
        return None
    se = np.sqrt(2 * var / n)
    df = 2 * n - 2
    apart = abs(d) / se > _st.t.ppf(1 - alpha / (2 * family), df)
    inside = abs(d) + _st.t.ppf(1 - alpha, df) * se < bound
    hit = np.flatnonzero(apart | inside)
    return int(n[hit[0]]) if hit.size else None


# ---------------------------------------------------------------------------------------------
# The verdict: the leader against the runner-up and the baseline


class Comparison(_Model):
    """One comparison made for the verdict: the leader (a) against another trial (b)."""

    a: str = Field(description="The leader.")
    b: str = Field(description="The trial it is compared with.")
    roles: list[Literal["runner_up", "baseline", "recommended"]] = Field(description="Why this comparison was made.")
    diff: Diff = Field(description="Relative difference of a against b (ratio scale) with interval and raw p-value.")
    p_adjusted: float | None = Field(description="Holm-adjusted p-value over the comparisons made; None if untestable.")
    significant: bool | None = Field(description="p_adjusted < alpha; None if untestable.")
    decided: Decided = Field(description="better / worse / equivalent / undecided, with what more runs would buy.")


class RankedCandidate(_Model):
    """One trial in the ranking by mean."""

    name: str = Field(description="Trial id.")
    rank: int = Field(description="1 = best mean.")
    summary: Summary = Field(description="Mean and interval of the metric.")
    complexity: int | None = Field(description="Number of non-default flags; None when not given.")
    vs_leader: Diff | None = Field(description="Leader against this trial, unadjusted; None for the leader itself.")
    vs_leader_decision: Decision | None = Field(
        default=None, description="The leader against this trial, unadjusted: better (the leader is ahead), "
        "equivalent, undecided; None for the leader itself.")


VerdictDecision = Literal["winner", "equivalent", "undecided", "cannot_tell", "only_candidate"]


class Verdict(_Model):
    """Which trial to recommend for one metric and profile, and why."""

    decision: VerdictDecision = Field(
        description="The leader against the runner-up: winner (better, after Holm); equivalent (within the margin: "
        "the simplest trial equivalent to the leader is recommended); undecided (neither yet: the leader is "
        "recommended by its mean, and the comparison says what more runs would buy); cannot_tell (single runs: no "
        "test); only_candidate (nothing to compare)."
    )
    winner: str | None = Field(description="The significant winner; None unless decision is 'winner'.")
    recommended: str = Field(description="The trial to recommend.")
    leader: str = Field(description="The trial with the best mean.")
    runner_up: str | None = Field(description="The trial with the second-best mean; None with one candidate.")
    baseline: str | None = Field(description="The baseline trial, if given.")
    higher_is_better: bool = Field(description="Direction of the metric (throughput: True, latency: False).")
    alpha: float = Field(description="Family-wise significance level for the Holm-corrected comparisons.")
    margin: float = Field(default=DEFAULT_MARGIN, description="Equivalence margin (fraction).")
    ranking: list[RankedCandidate] = Field(description="All trials with data, best mean first.")
    comparisons: list[Comparison] = Field(description="The comparisons made (leader vs runner-up, vs baseline, "
                                          "vs the recommended trial when it is not the leader).")
    equivalent: list[str] = Field(description="The leader and the trials proven equivalent to it, best mean first.")
    excluded: dict[str, str] = Field(default_factory=dict, description="Trials left out, with the reason.")
    reason: str = Field(description="Human-readable explanation of the decision.")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:+.1f} %"


def _pair(candidates: Mapping[str, Samples], a: str, b: str, blocks: Mapping[str, Blocked] | None,
          controls: Sequence[Control], method: str, confidence: float, seed: int = 0) -> Diff:
    """a against b: on all their runs, or by machine where `blocks` are given (a control less their own runs)."""
    if blocks is None:
        return relative_difference(candidates[a], candidates[b], method=method, confidence=confidence, seed=seed)
    return blocked_difference(blocks[a], blocks[b], confidence=confidence,
                              controls=[c for c in (k.without({a, b}) for k in controls) if c is not None])


def _describe(c: Comparison, alpha: float) -> str:
    d = c.diff
    s = f"{c.a} vs {c.b}: {_pct(d.relative)}"
    if d.machines not in (None, "one_machine"):
        s += f" ({d.machines_note})"
    if d.cannot_tell:
        return s + f" (cannot tell: {d.note})"
    if d.ci_low is not None and d.ci_high is not None:
        s += f" [{d.confidence * 100:.0f} % CI {_pct(d.ci_low)}, {_pct(d.ci_high)}]"
    rel = "<" if c.significant else ">="
    s += f", Holm-adjusted p = {c.p_adjusted:.3g} {rel} {alpha:g}: {c.decided.decision}"
    return s


def _check_arguments(candidates: Mapping[str, Samples], baseline: str | None, alpha: float,
                     complexity: Mapping[str, int] | None) -> None:
    """`compare_winner`'s arguments refused before anything is computed."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    if baseline is not None and baseline not in candidates:
        raise ValueError(f"baseline {baseline!r} is not among the candidates {sorted(candidates)}")
    if complexity is not None:
        missing = sorted(set(candidates) - set(complexity))
        if missing:
            raise ValueError(f"complexity is missing for {missing}")


def _summaries(candidates: Mapping[str, Samples], confidence: float) -> tuple[dict[str, Summary], dict[str, str]]:
    """Each candidate with a finite sample summarized, and the others left out with the reason."""
    excluded: dict[str, str] = {}
    summaries: dict[str, Summary] = {}
    for name, samples in candidates.items():
        x, dropped = _clean(samples)
        if x.size == 0:
            excluded[name] = f"no finite samples ({dropped} non-finite)"
            continue
        summaries[name] = summarize(samples, confidence=confidence)
    if not summaries:
        raise ValueError("no candidate has a finite sample")
    return summaries, excluded


def _comparisons(leader: str, runner_up: str | None, base_ok: str | None, recommended: str,
                 vs_leader: Mapping[str, Diff], alone: Mapping[str, Decided], *, alpha: float, margin: float,
                 higher_is_better: bool) -> list[Comparison]:
    """The verdict's comparisons: the leader against the runner-up and the baseline, Holm over the
    testable ones; then against the recommended trial where it is neither."""
    made: list[tuple[str, list]] = []
    if runner_up is not None:
        made.append((runner_up, ["runner_up"] + (["baseline"] if runner_up == base_ok else [])
                     + (["recommended"] if runner_up == recommended else [])))
    if base_ok is not None and base_ok not in (leader, runner_up):
        made.append((base_ok, ["baseline"] + (["recommended"] if base_ok == recommended else [])))
    testable = [k for k, _ in made if vs_leader[k].p_value is not None]
    adjusted = dict(zip(testable, holm([vs_leader[k].p_value for k in testable])))
    comparisons = [
        Comparison(a=leader, b=k, roles=roles, diff=vs_leader[k], p_adjusted=adjusted.get(k),
                   significant=None if k not in adjusted else adjusted[k] < alpha,
                   decided=decide(vs_leader[k], p_adjusted=adjusted.get(k), alpha=alpha, margin=margin,
                                  higher_is_better=higher_is_better, family=len(made)))
        for k, roles in made
    ]
    if recommended not in (leader, runner_up, base_ok):
        # The equivalence that makes a simpler trial the recommendation is part of the verdict. It is
        # a claim of the same, not of a difference, so it stays out of Holm's family (its p unadjusted).
        d = vs_leader[recommended]
        comparisons.append(Comparison(a=leader, b=recommended, roles=["recommended"], diff=d, p_adjusted=d.p_value,
                                      significant=None if d.p_value is None else d.p_value < alpha,
                                      decided=alone[recommended]))
    return comparisons


def _decision(leader: str, runner_up: str | None, recommended: str, comparisons: Sequence[Comparison],
              summaries: Mapping[str, Summary], *, margin: float, described: str,
              simplest: str) -> tuple[VerdictDecision, str | None, str]:
    """The verdict's decision, its winner (None unless one) and its reason, from the leader's
    comparison with the runner-up (the first one made)."""
    winner = None
    if runner_up is None:
        decision: VerdictDecision = "only_candidate"
        reason = f"{leader} is the only trial with data; nothing to compare it with"
    else:
        run_cmp = comparisons[0]
        outcome = run_cmp.decided.decision
        if run_cmp.significant is None:
            decision = "cannot_tell"
            reason = (f"cannot tell: {leader} has the best mean but its lead over {runner_up} cannot be tested "
                      f"(n={summaries[leader].n} vs n={summaries[runner_up].n}); recommending {recommended} by its "
                      f"mean alone, unconfirmed. {described}")
        elif outcome == "better":
            decision, winner = "winner", leader
            reason = f"{leader} wins: it is better than the runner-up{simplest}. {described}"
        elif outcome == "equivalent":
            decision = "equivalent"
            reason = (f"equivalent: {leader} and the runner-up {runner_up} are the same within \u00b1{margin * 100:g} %"
                      f"{simplest}. {described}")
        else:
            decision = "undecided"
            reason = (f"undecided: {leader} leads {runner_up} by its mean, but the data neither separate them nor "
                      f"prove them the same within \u00b1{margin * 100:g} % ({run_cmp.decided.why}); recommending "
                      f"{recommended}{simplest}. {described}")
    return decision, winner, reason


def _notes(excluded: Mapping[str, str], baseline: str | None, base_ok: str | None) -> list[str]:
    """What the reason adds at its end: the trials left out, a baseline with no data."""
    notes = []
    if excluded:
        notes.append("excluded: " + "; ".join(f"{k} ({v})" for k, v in excluded.items()))
    if baseline is not None and base_ok is None:
        notes.append(f"baseline {baseline} has no data, so no comparison with it")
    return notes


def _simplest(leader: str, recommended: str, complexity: Mapping[str, int] | None, alone: Mapping[str, Decided],
              margin: float) -> str:
    """The reason's clause on a simpler trial recommended in the leader's place; empty where none is."""
    if recommended == leader or complexity is None:
        return ""
    return (f"; {recommended} is the simplest of the trials equivalent to the leader within "
            f"\u00b1{margin * 100:g} % ({complexity[recommended]} non-default flags vs {complexity[leader]} "
            f"for {leader}): {alone[recommended].why}")


def compare_winner(
    candidates: Mapping[str, Samples],
    *,
    baseline: str | None,
    higher_is_better: bool = True,
    alpha: float = 0.05,
    complexity: Mapping[str, int] | None = None,
    method: Literal["welch", "bootstrap", "log"] = "log",
    seed: int = 0,
    margin: float = DEFAULT_MARGIN,
    blocks: Mapping[str, Blocked] | None = None,
    controls: Sequence[Control] = (),
) -> Verdict:
    """Rank trials by mean; decide the leader against the runner-up and the baseline.

    The comparisons made are leader vs runner-up and leader vs baseline (one comparison when the
    baseline is the leader or the runner-up); their p-values are Holm-adjusted together, and each
    gets a decision (`decide`): better, worse, equivalent within `margin`, or undecided.

    The recommendation is the simplest trial (lowest ``complexity``, better mean breaking ties)
    among the leader and the trials proven *equivalent* to it: extra flags that buy less than the
    margin are not worth carrying, but a trial that is merely not yet separated from the leader is
    not called the same. When it is not the leader, its comparison with the leader is added to the
    family, so the claim of equivalence is in the verdict. Equivalence uses each trial's own
    (unadjusted) TOST: it is the (1 - 2 alpha) interval inside the margin. A trial with a single
    run is never equivalent (nothing says it is); if the runner-up comparison cannot be tested the
    decision is ``cannot_tell`` and the leader by mean is recommended, unconfirmed.

    ``blocks`` (each candidate's samples by machine) makes every comparison one within the machines
    the two share, or across machines through one of ``controls`` (farm/analysis/stats/blocks.py);
    the ranking stays by mean over all runs.

    Each comparison's interval is at ``1 - alpha`` and not corrected; significance comes from
    the Holm-adjusted p-value, so an interval that just excludes zero can still be "not
    significant" when more than one comparison was made (the reason shows both).
    """
    _check_arguments(candidates, baseline, alpha, complexity)
    confidence = 1 - alpha
    summaries, excluded = _summaries(candidates, confidence)

    def cx(name: str) -> int | None:
        return None if complexity is None else int(complexity[name])

    sign = -1.0 if higher_is_better else 1.0
    order = sorted(summaries, key=lambda k: (sign * summaries[k].mean, cx(k) or 0, k))
    leader = order[0]
    runner_up = order[1] if len(order) > 1 else None
    base_ok = baseline if baseline in summaries else None

    vs_leader: dict[str, Diff] = {k: _pair(candidates, leader, k, blocks, controls, method, confidence, seed)
                                   for k in order[1:]}

    def unadjusted(k: str) -> Decided:
        return decide(vs_leader[k], p_adjusted=vs_leader[k].p_value, alpha=alpha, margin=margin,
                      higher_is_better=higher_is_better)

    alone = {k: unadjusted(k) for k in order[1:]}
    equivalent = [leader] + [k for k in order[1:] if alone[k].decision == "equivalent"]
    recommended = leader if complexity is None else min(equivalent, key=lambda k: (complexity[k], order.index(k)))

    comparisons = _comparisons(leader, runner_up, base_ok, recommended, vs_leader, alone, alpha=alpha,
                               margin=margin, higher_is_better=higher_is_better)
    ranking = [
        RankedCandidate(name=k, rank=i + 1, summary=summaries[k], complexity=cx(k), vs_leader=vs_leader.get(k),
                        vs_leader_decision=alone[k].decision if k in alone else None)
        for i, k in enumerate(order)
    ]
    notes = _notes(excluded, baseline, base_ok)
    described = "; ".join(_describe(c, alpha) for c in comparisons)
    simplest = _simplest(leader, recommended, complexity, alone, margin)
    decision, winner, reason = _decision(leader, runner_up, recommended, comparisons, summaries, margin=margin,
                                         described=described, simplest=simplest)
    if notes:
        reason += " (" + "; ".join(notes) + ")"
    return Verdict(decision=decision, winner=winner, recommended=recommended, leader=leader, runner_up=runner_up,
                   baseline=baseline, higher_is_better=higher_is_better, alpha=alpha, margin=margin, ranking=ranking,
                   comparisons=comparisons, equivalent=equivalent, excluded=excluded, reason=reason)


def leader_decisions(
    candidates: Mapping[str, Samples],
    *,
    alpha: float,
    margin: float = DEFAULT_MARGIN,
    higher_is_better: bool = True,
    blocks: Mapping[str, Blocked] | None = None,
    controls: Sequence[Control] = (),
) -> tuple[str, dict[str, Decided]]:
    """For ``--repeats auto``: the leader by mean and its decision against every other trial with
    data, Holm over all of them (the strictest family a report of these trials can use, so a
    decision made here is made there too); by machine where `blocks` are given, as `compare_winner`.
    An undecided one is what more runs are for; a trial
    better, worse or equivalent to the leader needs none."""
    sign = -1.0 if higher_is_better else 1.0
    means = {k: float(x.mean()) for k, s in candidates.items() if (x := _clean(s)[0]).size}
    if not means:
        raise ValueError("no candidate has a finite sample")
    leader = min(means, key=lambda k: (sign * means[k], k))
    others = [k for k in means if k != leader]
    diffs = {k: _pair(candidates, leader, k, blocks, controls, "log", 1 - alpha) for k in others}
    testable = [k for k in others if diffs[k].p_value is not None]
    adjusted = dict(zip(testable, holm([diffs[k].p_value for k in testable])))
    return leader, {k: decide(diffs[k], p_adjusted=adjusted.get(k), alpha=alpha, margin=margin,
                              higher_is_better=higher_is_better, family=max(1, len(others))) for k in others}
