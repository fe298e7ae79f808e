"""Winner or tie: Holm's correction over the leader's comparisons, the verdict, and whether more runs would help."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import Field

from farm.analysis.stats.summary import Summary, Samples, _clean, _Model, summarize
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
# Winner or tie


class Comparison(_Model):
    """One comparison made for the verdict: the leader (a) against another trial (b)."""

    a: str = Field(description="The leader.")
    b: str = Field(description="The trial it is compared with.")
    roles: list[Literal["runner_up", "baseline"]] = Field(description="Why this comparison was made.")
    diff: Diff = Field(description="Relative difference mean_a / mean_b - 1 with interval and raw p-value.")
    p_adjusted: float | None = Field(description="Holm-adjusted p-value over the comparisons made; None if untestable.")
    significant: bool | None = Field(description="p_adjusted < alpha; None if untestable.")


class RankedCandidate(_Model):
    """One trial in the ranking by mean."""

    name: str = Field(description="Trial id.")
    rank: int = Field(description="1 = best mean.")
    summary: Summary = Field(description="Mean and interval of the metric.")
    complexity: int | None = Field(description="Number of non-default flags; None when not given.")
    vs_leader: Diff | None = Field(description="Leader against this trial, unadjusted; None for the leader itself.")
    tied_with_leader: bool | None = Field(
        description="True: no significant difference from the leader (unadjusted test); False: the leader is "
        "significantly better; None: cannot tell (a single run). The leader is tied with itself."
    )


Decision = Literal["winner", "tie", "cannot_tell", "only_candidate"]


class Verdict(_Model):
    """Which trial to recommend for one metric and profile, and why."""

    decision: Decision = Field(
        description="winner: the leader's lead over the runner-up is significant after Holm; tie: it is not, "
        "and the simplest trial tied with the leader is recommended; cannot_tell: single runs, no test is "
        "possible and the leader by mean is recommended unconfirmed; only_candidate: nothing to compare."
    )
    winner: str | None = Field(description="The significant winner; None unless decision is 'winner'.")
    recommended: str = Field(description="The trial to recommend.")
    leader: str = Field(description="The trial with the best mean.")
    runner_up: str | None = Field(description="The trial with the second-best mean; None with one candidate.")
    baseline: str | None = Field(description="The baseline trial, if given.")
    higher_is_better: bool = Field(description="Direction of the metric (throughput: True, latency: False).")
    alpha: float = Field(description="Family-wise significance level for the Holm-corrected comparisons.")
    ranking: list[RankedCandidate] = Field(description="All trials with data, best mean first.")
    comparisons: list[Comparison] = Field(description="The comparisons made (leader vs runner-up, vs baseline).")
    tied: list[str] = Field(description="Trials tied with the leader (leader included), best mean first.")
    excluded: dict[str, str] = Field(default_factory=dict, description="Trials left out, with the reason.")
    reason: str = Field(description="Human-readable explanation of the decision.")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:+.1f} %"


def _describe(c: Comparison, alpha: float) -> str:
    d = c.diff
    s = f"{c.a} vs {c.b}: {_pct(d.relative)}"
    if d.cannot_tell:
        return s + f" (cannot tell: {d.note})"
    if d.ci_low is not None and d.ci_high is not None:
        s += f" [{d.confidence * 100:.0f} % CI {_pct(d.ci_low)}, {_pct(d.ci_high)}]"
    rel = "<" if c.significant else ">="
    s += f", Holm-adjusted p = {c.p_adjusted:.3g} {rel} {alpha:g}"
    return s


def compare_winner(
    candidates: Mapping[str, Samples],
    *,
    baseline: str | None,
    higher_is_better: bool = True,
    alpha: float = 0.05,
    complexity: Mapping[str, int] | None = None,
    method: Literal["welch", "bootstrap"] = "welch",
    seed: int = 0,
) -> Verdict:
    """Rank trials by mean; a winner only when its lead over the runner-up is significant.

    The comparisons made are leader vs runner-up and leader vs baseline (one comparison when the
    baseline is the leader or the runner-up); their p-values are Holm-adjusted together.
    Otherwise the decision is a tie and the recommendation is the trial with the lowest
    ``complexity`` (fewer non-default flags; better mean breaks ties) among those tied with the
    leader. "Tied" uses the *unadjusted* test of the leader against each trial: correcting for
    multiplicity makes claims of difference harder, so using it here would call more trials tied
    and could recommend one the data already show to be worse. A trial with a single run is
    never counted as tied (nothing says it is), and if the runner-up comparison cannot be tested
    the decision is ``cannot_tell`` and the leader by mean is recommended, unconfirmed.

    Each comparison's interval is at ``1 - alpha`` and not corrected; significance comes from
    the Holm-adjusted p-value, so an interval that just excludes zero can still be "not
    significant" when more than one comparison was made (the reason shows both).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    if baseline is not None and baseline not in candidates:
        raise ValueError(f"baseline {baseline!r} is not among the candidates {sorted(candidates)}")
    if complexity is not None:
        missing = sorted(set(candidates) - set(complexity))
        if missing:
            raise ValueError(f"complexity is missing for {missing}")
    confidence = 1 - alpha

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

    def cx(name: str) -> int | None:
        return None if complexity is None else int(complexity[name])

    sign = -1.0 if higher_is_better else 1.0
    order = sorted(summaries, key=lambda k: (sign * summaries[k].mean, cx(k) or 0, k))
    leader = order[0]
    runner_up = order[1] if len(order) > 1 else None
    base_ok = baseline if baseline in summaries else None

    vs_leader: dict[str, Diff] = {
        k: relative_difference(candidates[leader], candidates[k], method=method, confidence=confidence, seed=seed)
        for k in order[1:]
    }

    # The comparisons made, Holm over the testable ones.
    made: list[tuple[str, list]] = []
    if runner_up is not None:
        made.append((runner_up, ["runner_up"] + (["baseline"] if runner_up == base_ok else [])))
    if base_ok is not None and base_ok not in (leader, runner_up):
        made.append((base_ok, ["baseline"]))
    testable = [k for k, _ in made if vs_leader[k].p_value is not None]
    adjusted = dict(zip(testable, holm([vs_leader[k].p_value for k in testable])))
    comparisons = [
        Comparison(a=leader, b=k, roles=roles, diff=vs_leader[k], p_adjusted=adjusted.get(k),
                   significant=None if k not in adjusted else adjusted[k] < alpha)
        for k, roles in made
    ]

    def tie_state(k: str) -> bool | None:
        if k == leader:
            return True
        d = vs_leader[k]
        return None if d.cannot_tell else not d.significant

    tied = [k for k in order if tie_state(k) is True]
    ranking = [
        RankedCandidate(name=k, rank=i + 1, summary=summaries[k], complexity=cx(k),
                        vs_leader=vs_leader.get(k), tied_with_leader=tie_state(k))
        for i, k in enumerate(order)
    ]
    notes = []
    if excluded:
        notes.append("excluded: " + "; ".join(f"{k} ({v})" for k, v in excluded.items()))
    if baseline is not None and base_ok is None:
        notes.append(f"baseline {baseline} has no data, so no comparison with it")
    described = "; ".join(_describe(c, alpha) for c in comparisons)

    if runner_up is None:
        decision: Decision = "only_candidate"
        winner, recommended = None, leader
        reason = f"{leader} is the only trial with data; nothing to compare it with"
    else:
        run_cmp = comparisons[0]
        if run_cmp.significant is None:
            decision, winner, recommended = "cannot_tell", None, leader
            reason = (f"cannot tell: {leader} has the best mean but its lead over {runner_up} cannot be tested "
                      f"(n={summaries[leader].n} vs n={summaries[runner_up].n}); recommending {leader} by its "
                      f"mean alone, unconfirmed. {described}")
        elif run_cmp.significant:
            decision, winner, recommended = "winner", leader, leader
            reason = f"{leader} wins: its lead over the runner-up is significant. {described}"
        else:
            decision, winner = "tie", None
            if complexity is None:
                recommended = leader
                why = "no complexity given, so the leader by mean is recommended"
            else:
                recommended = min(tied, key=lambda k: (complexity[k], order.index(k)))
                if recommended == leader:
                    why = f"{leader} is also the simplest of them ({complexity[leader]} non-default flags)"
                else:
                    why = (f"{recommended} is the simplest of them ({complexity[recommended]} non-default flags "
                           f"vs {complexity[leader]} for {leader}); {leader}'s lead over it is "
                           f"{_pct(vs_leader[recommended].relative)}, not significant "
                           f"(p = {vs_leader[recommended].p_value:.3g})")
            reason = (f"tie: {leader}'s lead over {runner_up} is not significant, so no winner. Tied with the "
                      f"leader: {', '.join(tied)}; {why}. {described}")
    if notes:
        reason += " (" + "; ".join(notes) + ")"
    return Verdict(decision=decision, winner=winner, recommended=recommended, leader=leader, runner_up=runner_up,
                   baseline=baseline, higher_is_better=higher_is_better, alpha=alpha, ranking=ranking,
                   comparisons=comparisons, tied=tied, excluded=excluded, reason=reason)


def needs_more_runs(
    candidates: Mapping[str, Samples],
    leader: str,
    *,
    confidence: float = 0.95,
) -> list[str]:
    """For ``--repeats auto``: the trials to run again, or [] when the top of the ranking has separated.

    A trial is listed when its confidence interval of the mean overlaps the leader's, or when it
    or the leader has a single run (no interval: cannot exclude an overlap). When anything is
    listed the leader comes first, since its interval must shrink too. Trials without finite
    samples are not listed (nothing to refine).
    """
    if leader not in candidates:
        raise ValueError(f"leader {leader!r} is not among the candidates")
    lead = summarize(candidates[leader], confidence=confidence)
    out = []
    for name, samples in candidates.items():
        if name == leader or _clean(samples)[0].size == 0:
            continue
        s = summarize(samples, confidence=confidence)
        if not (lead.has_interval and s.has_interval):
            out.append(name)
        elif s.ci_low <= lead.ci_high and lead.ci_low <= s.ci_high:
            out.append(name)
    return [leader, *out] if out else []
