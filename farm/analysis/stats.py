"""Statistics for benchmark repeats: intervals, relative differences, Holm, winner or tie.

Pure: numpy, scipy and pydantic only (no ray, no mlflow), so selection can be recomputed from
stored results at any time. Every function takes plain numbers (the samples of one metric, one
value per repeat) and returns a pydantic model that says what it could and could not tell.

Conventions
-----------
- A *relative difference* is ``mean_a / mean_b - 1`` (``+0.10`` = a is 10 % above b).
- Non-finite samples (NaN, inf, ``None``) are dropped and counted (``n_dropped``), never
  silently averaged in. A failed run should not reach this module as a number at all; the count
  makes it visible when one does.
- One run gives a mean but no interval and no test: results then say ``cannot_tell``.
- ``method="welch"`` (default): Welch's t-test for the p-value and Fieller's interval for the
  ratio of means, both with the Welch–Satterthwaite degrees of freedom. At ratio 1 Fieller's
  statistic *is* Welch's t, so the interval excludes "no difference" exactly when p < 1 -
  confidence: the interval and the p-value never contradict each other.
- ``method="bootstrap"``: a seeded percentile bootstrap of the ratio of means (each side
  resampled on its own). The p-value is still Welch's. With 3 to 5 repeats the bootstrap
  interval is too narrow (a sample of 3 has only 10 distinct resamples); prefer Welch there.
- Both sides with zero variance (every repeat identical): equal constants are "no difference"
  (p = 1); different constants are significant (p = 0), because Welch's statistic grows without
  bound as both variances shrink with the difference fixed, and repeated identical
  measurements are the strongest evidence a benchmark can give that the difference is the
  measurement's and not noise. (This needs n >= 2 on both sides; a metric rounded so coarsely
  that its noise vanishes would be over-trusted, and the note on the result says why it was
  called.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats as _st

__all__ = [
    "Summary",
    "Diff",
    "Comparison",
    "RankedCandidate",
    "Verdict",
    "ProfileCost",
    "CrossProfileEntry",
    "CrossProfileRanking",
    "EdgeWarning",
    "summarize",
    "relative_difference",
    "holm",
    "compare_winner",
    "needs_more_runs",
    "worst_case_relative",
    "pareto_front",
    "edge_warnings",
]

Samples = Sequence[float] | np.ndarray


class _Model(BaseModel):
    # allow_inf_nan=False: a NaN that escapes into a result is a bug here, not a value to report.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _clean(samples: Samples) -> tuple[np.ndarray, int]:
    """Finite samples as float64 and how many were dropped (NaN, inf, None)."""
    arr = np.asarray(samples, dtype=float).ravel()
    keep = np.isfinite(arr)
    return arr[keep], int(arr.size - keep.sum())


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")


# ---------------------------------------------------------------------------------------------
# One sample


class Summary(_Model):
    """Mean and confidence interval of one metric over the repeats of one trial and profile."""

    n: int = Field(description="Number of finite samples used.")
    n_dropped: int = Field(default=0, description="Non-finite samples (NaN, inf, None) left out.")
    mean: float = Field(description="Arithmetic mean of the samples.")
    std: float | None = Field(description="Sample standard deviation (ddof=1); None when n = 1.")
    sem: float | None = Field(description="Standard error of the mean, std / sqrt(n); None when n = 1.")
    confidence: float = Field(description="Confidence level of the interval, e.g. 0.95.")
    ci_low: float | None = Field(description="Lower end of the Student-t interval of the mean; None when n = 1.")
    ci_high: float | None = Field(description="Upper end of the Student-t interval of the mean; None when n = 1.")
    has_interval: bool = Field(description="False when there is a single run and so no interval.")

    @property
    def half_width(self) -> float | None:
        """Half the interval's width, or None without an interval."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_high - self.ci_low) / 2


def summarize(samples: Samples, *, confidence: float = 0.95) -> Summary:
    """Mean, sample std and Student-t confidence interval of the mean of one metric's repeats.

    Raises ValueError when no finite sample is left: there is nothing to summarize.
    """
    _check_confidence(confidence)
    x, dropped = _clean(samples)
    n = int(x.size)
    if n == 0:
        raise ValueError(f"no finite samples to summarize ({dropped} non-finite dropped)")
    mean = float(x.mean())
    if n == 1:
        return Summary(n=1, n_dropped=dropped, mean=mean, std=None, sem=None, confidence=confidence,
                       ci_low=None, ci_high=None, has_interval=False)
    std = float(x.std(ddof=1))
    sem = std / math.sqrt(n)
    half = float(_st.t.ppf(0.5 + confidence / 2, df=n - 1)) * sem
    return Summary(n=n, n_dropped=dropped, mean=mean, std=std, sem=sem, confidence=confidence,
                   ci_low=mean - half, ci_high=mean + half, has_interval=True)


# ---------------------------------------------------------------------------------------------
# Two samples


class Diff(_Model):
    """Relative difference of two trials' means (a against b) with its interval and p-value."""

    method: Literal["welch", "bootstrap"] = Field(description="How the interval was computed.")
    confidence: float = Field(description="Confidence level of the interval; alpha = 1 - confidence.")
    n_a: int = Field(description="Finite samples of a.")
    n_b: int = Field(description="Finite samples of b.")
    n_dropped_a: int = Field(default=0, description="Non-finite samples of a left out.")
    n_dropped_b: int = Field(default=0, description="Non-finite samples of b left out.")
    mean_a: float | None = Field(description="Mean of a; None when a has no finite sample.")
    mean_b: float | None = Field(description="Mean of b; None when b has no finite sample.")
    relative: float | None = Field(description="mean_a / mean_b - 1; None when undefined (no data or mean_b = 0).")
    ci_low: float | None = Field(description="Lower end of the interval of the relative difference; None if none.")
    ci_high: float | None = Field(description="Upper end of the interval of the relative difference; None if none.")
    p_value: float | None = Field(description="Two-sided Welch t-test p-value for equal means; None if untestable.")
    significant: bool | None = Field(
        description="p_value < 1 - confidence, before any multiple-comparison correction; None if untestable."
    )
    cannot_tell: bool = Field(description="True when the data cannot support a test (n < 2 on a side, no data).")
    note: str = Field(default="", description="Why the result is what it is, when that is not the ordinary case.")


def _welch_df(va: float, na: int, vb: float, nb: int) -> float:
    sa2, sb2 = va / na, vb / nb
    den = sa2 * sa2 / (na - 1) + sb2 * sb2 / (nb - 1)
    return (sa2 + sb2) ** 2 / den


def _fieller(ma: float, sa2: float, mb: float, sb2: float, t: float) -> tuple[float, float] | None:
    """Fieller interval of ma/mb for independent means with variances sa2, sb2 (of the means).

    The set of R with (ma - R*mb)^2 <= t^2 (sa2 + R^2 sb2). Bounded only when mb is itself
    distinguishable from zero (A > 0); otherwise None.
    """
    a = mb * mb - t * t * sb2
    if a <= 0:
        return None
    root = t * math.sqrt(sa2 * a + ma * ma * sb2)
    lo, hi = (ma * mb - root) / a, (ma * mb + root) / a
    return (lo, hi)


def relative_difference(
    a_samples: Samples,
    b_samples: Samples,
    *,
    method: Literal["welch", "bootstrap"] = "welch",
    confidence: float = 0.95,
    seed: int = 0,
    n_resamples: int = 10_000,
) -> Diff:
    """Relative difference mean_a / mean_b - 1 with an interval and Welch's p-value.

    See the module docstring for the methods and the edge cases (n = 1, zero variance, NaN).
    """
    _check_confidence(confidence)
    if method not in ("welch", "bootstrap"):
        raise ValueError(f"method must be 'welch' or 'bootstrap', got {method!r}")
    a, da = _clean(a_samples)
    b, db = _clean(b_samples)
    na, nb = int(a.size), int(b.size)
    ma = float(a.mean()) if na else None
    mb = float(b.mean()) if nb else None
    base = dict(method=method, confidence=confidence, n_a=na, n_b=nb, n_dropped_a=da, n_dropped_b=db,
                mean_a=ma, mean_b=mb)

    def untestable(note: str, relative: float | None) -> Diff:
        return Diff(**base, relative=relative, ci_low=None, ci_high=None, p_value=None, significant=None,
                    cannot_tell=True, note=note)

    if ma is None or mb is None:
        return untestable("no finite samples on " + ("both sides" if ma is None and mb is None
                                                      else ("a" if ma is None else "b")), None)
    if mb == 0:
        return untestable("mean of b is 0: a relative difference is undefined", None)
    rel = ma / mb - 1
    if na < 2 or nb < 2:
        return untestable(f"a single run (n_a={na}, n_b={nb}) gives no interval and no test", rel)

    alpha = 1 - confidence
    va, vb = float(a.var(ddof=1)), float(b.var(ddof=1))

    if va == 0 and vb == 0:
        if ma == mb:
            return Diff(**base, relative=0.0, ci_low=0.0, ci_high=0.0, p_value=1.0, significant=False,
                        cannot_tell=False, note="every repeat identical on both sides and equal: no difference")
        return Diff(**base, relative=rel, ci_low=rel, ci_high=rel, p_value=0.0, significant=True,
                    cannot_tell=False,
                    note="every repeat identical on both sides but the constants differ: "
                    "an exact difference for these runs (zero noise observed)")

    # From the summary statistics: scipy's raw-sample version warns on a constant side, which is a
    # legitimate case here (one side with zero variance).
    p = float(_st.ttest_ind_from_stats(ma, math.sqrt(va), na, mb, math.sqrt(vb), nb, equal_var=False).pvalue)
    note = ""
    if method == "welch":
        df = _welch_df(va, na, vb, nb)
        t = float(_st.t.ppf(1 - alpha / 2, df))
        ci = _fieller(ma, va / na, mb, vb / nb, t)
        if ci is None:
            note = "Fieller interval unbounded: the mean of b is not distinguishable from zero"
            lo = hi = None
        else:
            lo, hi = ci[0] - 1, ci[1] - 1
    else:
        rng = np.random.default_rng(seed)
        ra = a[rng.integers(0, na, size=(n_resamples, na))].mean(axis=1)
        rb = b[rng.integers(0, nb, size=(n_resamples, nb))].mean(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = ra / rb
        ratio = ratio[np.isfinite(ratio)]
        if ratio.size < n_resamples * 0.99:
            note = "bootstrap interval not computed: resampled mean of b hit 0 too often"
            lo = hi = None
        else:
            qlo, qhi = np.quantile(ratio, [alpha / 2, 1 - alpha / 2])
            lo, hi = float(qlo) - 1, float(qhi) - 1
        if min(na, nb) < 6:
            note = (note + "; " if note else "") + (
                f"bootstrap with n={min(na, nb)} understates the interval; Welch is the better choice")
    return Diff(**base, relative=rel, ci_low=lo, ci_high=hi, p_value=p, significant=p < alpha,
                cannot_tell=False, note=note)


# ---------------------------------------------------------------------------------------------
# Multiple comparisons


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


# ---------------------------------------------------------------------------------------------
# One command across workloads (issue 7 point 5)


class ProfileCost(_Model):
    """One trial on one profile, against the baseline and against that profile's winner."""

    profile: str = Field(description="Profile name.")
    mean: float = Field(description="The trial's mean throughput on this profile.")
    relative_to_baseline: float = Field(description="mean / baseline mean - 1.")
    profile_winner: str = Field(description="The best trial on this profile.")
    cost_vs_profile_winner: float = Field(
        description="mean / profile winner's mean - 1 (<= 0 when the winner is the best mean): what choosing "
        "this trial for every workload costs here."
    )


class CrossProfileEntry(_Model):
    """One trial's standing over all profiles."""

    trial: str = Field(description="Trial id.")
    comparable: bool = Field(description="False when the trial lacks a result on some profile.")
    missing_profiles: list[str] = Field(default_factory=list, description="Profiles with no result for this trial.")
    worst_case_relative: float | None = Field(
        description="Minimum over profiles of mean / baseline mean - 1; None when not comparable."
    )
    worst_profile: str | None = Field(description="The profile where that minimum occurs; None when not comparable.")
    geomean_relative: float | None = Field(
        description="Geometric mean over profiles of mean / baseline mean, minus 1; None when not comparable."
    )
    per_profile: list[ProfileCost] = Field(description="Per-profile figures (only the profiles it has).")


class CrossProfileRanking(_Model):
    """Trials ranked by worst-case throughput relative to the baseline across profiles."""

    baseline: str = Field(description="The baseline trial.")
    profiles: list[str] = Field(description="Profiles the ranking is over (those where the baseline has a result).")
    profiles_without_baseline: list[str] = Field(
        default_factory=list, description="Profiles left out because the baseline has no usable result there."
    )
    profile_winners: dict[str, str] = Field(description="The winner used for each profile's cost figure.")
    recommended: str | None = Field(description="Best worst-case among comparable trials; None if none is.")
    entries: list[CrossProfileEntry] = Field(
        description="Comparable trials by worst case then geometric mean (both descending), then the rest by name."
    )


def worst_case_relative(
    per_profile: Mapping[str, Mapping[str, float]],
    baseline: str,
    *,
    profile_winners: Mapping[str, str] | None = None,
) -> CrossProfileRanking:
    """Rank trials by their worst-case throughput relative to the baseline over all profiles.

    ``per_profile[profile][trial]`` is a mean (higher is better). A trial without a finite
    result on some profile is reported as not comparable, never filled in. A profile where the
    baseline has no positive finite mean cannot give relative figures and is left out, and
    listed. ``profile_winners`` (e.g. each profile's ``Verdict.recommended``) overrides the
    default per-profile winner, the best mean.
    """
    def ok(v: float | None) -> bool:
        return v is not None and math.isfinite(v)

    profiles = [p for p in per_profile if ok(per_profile[p].get(baseline)) and per_profile[p][baseline] > 0]
    skipped = [p for p in per_profile if p not in profiles]
    if not profiles:
        raise ValueError(f"baseline {baseline!r} has no usable result on any profile")
    winners: dict[str, str] = {}
    for p in profiles:
        have = {t: v for t, v in per_profile[p].items() if ok(v)}
        if profile_winners and p in profile_winners:
            if profile_winners[p] not in have:
                raise ValueError(f"profile winner {profile_winners[p]!r} has no result on profile {p!r}")
            winners[p] = profile_winners[p]
        else:
            winners[p] = max(sorted(have), key=lambda t: have[t])

    trials = sorted({t for p in per_profile for t in per_profile[p]})
    entries = []
    for t in trials:
        costs = []
        missing = []
        for p in profiles:
            v = per_profile[p].get(t)
            if not ok(v):
                missing.append(p)
                continue
            b, w = per_profile[p][baseline], per_profile[p][winners[p]]
            costs.append(ProfileCost(profile=p, mean=float(v), relative_to_baseline=v / b - 1,
                                     profile_winner=winners[p], cost_vs_profile_winner=v / w - 1))
        comparable = not missing
        if comparable:
            worst = min(costs, key=lambda c: c.relative_to_baseline)
            ratios = np.array([c.mean / per_profile[c.profile][baseline] for c in costs])
            geo = float(np.exp(np.mean(np.log(ratios)))) - 1 if np.all(ratios > 0) else None
            entries.append(CrossProfileEntry(trial=t, comparable=True, worst_case_relative=worst.relative_to_baseline,
                                             worst_profile=worst.profile, geomean_relative=geo, per_profile=costs))
        else:
            entries.append(CrossProfileEntry(trial=t, comparable=False, missing_profiles=missing,
                                             worst_case_relative=None, worst_profile=None, geomean_relative=None,
                                             per_profile=costs))
    good = sorted((e for e in entries if e.comparable),
                  key=lambda e: (-e.worst_case_relative, -(e.geomean_relative if e.geomean_relative is not None
                                                          else -math.inf), e.trial))
    rest = [e for e in entries if not e.comparable]
    return CrossProfileRanking(baseline=baseline, profiles=profiles, profiles_without_baseline=skipped,
                               profile_winners=winners, recommended=good[0].trial if good else None,
                               entries=good + rest)


# ---------------------------------------------------------------------------------------------
# Pareto front and edge warnings (issue 7 point 6, numeric core)


def pareto_front(points: Sequence[tuple[str, float, float]]) -> list[str]:
    """Ids of the points no other point beats (higher throughput, lower latency), by latency ascending.

    A point is dominated when another has throughput >= and latency <= with at least one strict.
    Identical points are all kept. Points with a non-finite coordinate are left out.
    """
    pts = [(i, float(t), float(l)) for i, t, l in points if math.isfinite(t) and math.isfinite(l)]
    # Sort by throughput descending, then latency ascending: a point is on the front exactly when
    # its latency is below every latency seen before it, or equal to a front point's that it ties.
    pts.sort(key=lambda p: (-p[1], p[2]))
    front: list[tuple[str, float, float]] = []
    best_lat = math.inf
    for p in pts:
        if p[2] < best_lat:
            front.append(p)
            best_lat = p[2]
        elif front and p[1] == front[-1][1] and p[2] == front[-1][2]:
            front.append(p)  # identical to a front point: nothing dominates it either
    front.sort(key=lambda p: (p[2], p[1], p[0]))
    return [p[0] for p in front]


class EdgeWarning(_Model):
    """A numeric knob whose best value is the smallest or largest value tried."""

    knob: str = Field(description="Flag or parameter name.")
    best_value: float = Field(description="The value with the best mean.")
    edge: Literal["low", "high"] = Field(description="Which end of the tried range it sits at.")
    tried: list[float] = Field(description="The values tried, ascending.")
    next_value: float = Field(description="The next value to try beyond the edge.")
    message: str = Field(description="Human-readable warning.")


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _is_pow2(v: float) -> bool:
    return v > 0 and float(v).is_integer() and (int(v) & (int(v) - 1)) == 0


def _tidy(x: float, integral: bool) -> float:
    return float(int(round(x))) if integral else float(f"{x:.12g}")


def edge_warnings(
    values_by_knob: Mapping[str, Mapping[object, float]],
    *,
    higher_is_better: bool = True,
) -> list[EdgeWarning]:
    """Warnings for numeric knobs whose best value (by mean) is at the edge of the tried range.

    ``values_by_knob[knob][value]`` is the mean of the metric for that knob value (e.g. the best
    trial with that value). Knobs with non-numeric or boolean values, fewer than two values, or
    a best mean shared with an interior value get no warning. The next value: for powers of two
    double the largest / halve the smallest; otherwise step by the spacing between the edge
    and its neighbour. No warning when there is no sensible next value (halving an integer 1,
    or stepping a positive range to zero or below).
    """
    out = []
    for knob, table in values_by_knob.items():
        if len(table) < 2 or not all(_is_number(v) for v in table):
            continue
        values = sorted(float(v) for v in table)
        means = {float(v): float(m) for v, m in table.items() if m is not None and math.isfinite(float(m))}
        if not means:
            continue
        best = max(means.values()) if higher_is_better else min(means.values())
        at = [values.index(v) for v, m in means.items() if m == best]
        # A value that was tried but has no result (failed, NaN) still bounds the range: the
        # next value beyond the best has then been tried already.
        if any(0 < i < len(values) - 1 for i in at):
            continue
        if 0 in at and len(values) - 1 in at:
            continue  # best at both ends: a flat response, no direction to go
        i = at[0]
        edge: Literal["low", "high"] = "low" if i == 0 else "high"
        integral = all(float(v).is_integer() and not isinstance(v, (float, np.floating)) for v in table)
        if all(_is_pow2(v) for v in values):
            nxt = values[-1] * 2 if edge == "high" else values[0] / 2
            if edge == "low" and integral and nxt < 1:
                continue
            rule = "doubling" if edge == "high" else "halving"
        else:
            step = values[-1] - values[-2] if edge == "high" else values[1] - values[0]
            nxt = values[-1] + step if edge == "high" else values[0] - step
            if edge == "low" and values[0] > 0 and nxt <= 0:
                continue
            rule = f"stepping by {_tidy(step, integral):g}"
        nxt = _tidy(nxt, integral)
        best_v = _tidy(values[i], integral)
        msg = (f"{knob}: the best value {best_v:g} is the {'largest' if edge == 'high' else 'smallest'} tried "
               f"({', '.join(f'{_tidy(v, integral):g}' for v in values)}); the optimum may lie beyond it: "
               f"try {nxt:g} ({rule})")
        out.append(EdgeWarning(knob=knob, best_value=best_v, edge=edge, tried=[_tidy(v, integral) for v in values],
                               next_value=nxt, message=msg))
    return out
