"""The quality gate's paired verdict: did a numerics-changing trial answer worse than its reference?

Both trials answered the same items (the same ids), greedily. Each item is a pair of
correct/incorrect; only the discordant pairs say anything about a difference:

- `b`: the gated trial right, its reference wrong; `c`: the gated trial wrong, its reference right.
- **worse / better**: McNemar's exact test, a two-sided binomial test of `c` among `b + c` at 1/2
  (scipy.stats.binomtest), significant at the study's alpha; the sign of `b - c` says which.
- **equivalent**: the paired difference in accuracy (gated - reference, `(b - c) / n`) has its
  1 - 2 alpha confidence interval inside +-margin (two one-sided tests at alpha each, the same
  rule as throughput's equivalence in farm/analysis/stats/verdict.py). The interval is Tango's
  asymptotic score interval for the difference of paired proportions (T. Tango, "Equivalence
  test and confidence interval for the difference in proportions for the paired-sample design",
  Statistics in Medicine 17:891-908, 1998), which Fagerland, Lydersen and Laake recommend for
  paired binomial data ("Recommended tests and confidence intervals for paired binomial
  proportions", Statistics in Medicine 33:2850-2875, 2014). Unlike a Wald interval, or
  Newcombe's square-and-add interval, it does not collapse to a point when no pair is
  discordant: 300 items answered identically give about +-0.9 points at 90 %, not +-0.
- **cannot tell**: neither.

A significant difference wins over equivalence: a configuration measurably worse is refused even
when the loss is inside the margin (the gate's promise is "no worse", and the margin is the loss
it accepts only when it cannot be seen). Pure: no engine, no store; scipy only.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal, Mapping

from pydantic import Field

from farm.strict import Strict
from farm.study.repeats import FAMILY_ALPHA

Verdict = Literal["worse", "better", "equivalent", "cannot tell"]


class PairedCounts(Strict):
    """The paired 2x2 table of one gated trial against its reference, over the same items."""

    both: int = Field(ge=0, description="Items both answered correctly.")
    only_gated: int = Field(ge=0, description="Items the gated trial answered correctly and its reference did not (b).")
    only_reference: int = Field(ge=0, description="Items the reference answered correctly and the gated trial did not (c).")
    neither: int = Field(ge=0, description="Items neither answered correctly.")

    @property
    def n(self) -> int:
        return self.both + self.only_gated + self.only_reference + self.neither


class QualityVerdict(Strict):
    """One gated trial against its reference on the same items: the paired verdict and what stands beside it."""

    verdict: Verdict
    why: str = Field(description="One line: the verdict, the difference, its interval or p-value.")
    items: int = Field(description="Items both answered (paired by id).")
    counts: PairedCounts
    accuracy: float = Field(description="The gated trial's accuracy on the items.")
    reference_accuracy: float
    difference: float = Field(description="accuracy - reference_accuracy, in accuracy points (a fraction).")
    low: float = Field(description="The difference's 1 - 2 alpha interval (Tango's score interval): low end.")
    high: float
    p_value: float = Field(description="McNemar's exact test, two-sided.")
    alpha: float
    margin: float
    first_token_agreement: float | None = Field(
        default=None, description="Fraction of items whose first generated token is the same in both; None: not given.")
    answer_agreement: float | None = Field(
        default=None, description="Fraction of items whose answer (normalized) is the same in both; None: not given.")


def paired_counts(gated: Mapping[str, bool], reference: Mapping[str, bool]) -> PairedCounts:
    """The paired table of two runs over the same item ids; a `ValueError` says which ids differ."""
    if set(gated) != set(reference):
        only_g, only_r = sorted(set(gated) - set(reference)), sorted(set(reference) - set(gated))
        raise ValueError(f"the two runs answered different items ({len(only_g)} only in the gated trial, e.g. "
                         f"{only_g[:3]}; {len(only_r)} only in the reference, e.g. {only_r[:3]}): the verdict is paired by id")
    both = only_g = only_r = neither = 0
    for item, right in gated.items():
        ref = reference[item]
        if right and ref:
            both += 1
        elif right:
            only_g += 1
        elif ref:
            only_r += 1
        else:
            neither += 1
    return PairedCounts(both=both, only_gated=only_g, only_reference=only_r, neither=neither)


def _tango_statistic(delta: float, b: int, c: int, n: int) -> float:
    """Tango's score statistic for H0: p(gated right) - p(reference right) = delta, with `b`, `c`
    the discordant counts of `n` pairs; the restricted maximum-likelihood estimate of the
    reference-only cell is the root of Tango's quadratic (1998, eq. 4)."""
    qa = 2 * n
    qb = -b - c + (2 * n - b + c) * delta
    qc = -c * delta * (1 - delta)
    p21 = (math.sqrt(max(qb * qb - 4 * qa * qc, 0.0)) - qb) / (2 * qa)
    variance = n * (2 * p21 + delta * (1 - delta))
    if variance <= 0:
        return math.copysign(math.inf, b - c - n * delta) if b - c != n * delta else 0.0
    return (b - c - n * delta) / math.sqrt(variance)


@lru_cache(maxsize=65536)
def tango_interval(b: int, c: int, n: int, confidence: float) -> tuple[float, float]:
    """Tango's asymptotic score interval for the difference of paired proportions, (b - c) / n:
    every delta whose score statistic lies within +-z of the confidence level (two-sided)."""
    if n <= 0 or b < 0 or c < 0 or b + c > n:
        raise ValueError(f"no paired table with b={b}, c={c} of n={n}")
    from scipy.optimize import brentq  # scipy's import costs a second: only a verdict gets here
    from scipy.stats import norm

    z = float(norm.ppf(1 - (1 - confidence) / 2))
    estimate = (b - c) / n
    eps = 1e-12
    # The statistic falls as delta rises: the low end is where it crosses +z, the high end -z; an
    # end that does not cross before +-1 is +-1.
    low, high = -1.0, 1.0
    if estimate > -1 and _tango_statistic(-1 + eps, b, c, n) > z:
        low = brentq(lambda d: _tango_statistic(d, b, c, n) - z, -1 + eps, estimate, xtol=1e-10)
    if estimate < 1 and _tango_statistic(1 - eps, b, c, n) < -z:
        high = brentq(lambda d: _tango_statistic(d, b, c, n) + z, estimate, 1 - eps, xtol=1e-10)
    return low, high


@lru_cache(maxsize=65536)
def mcnemar_exact_p(b: int, c: int) -> float:
    """McNemar's exact test: two-sided binomial test of `c` among the `b + c` discordant pairs at 1/2."""
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest  # scipy's import costs a second: only a verdict gets here

    return float(binomtest(c, b + c, 0.5, alternative="two-sided").pvalue)


def _points(x: float) -> str:
    return f"{x * 100:+.1f} points"


def verdict_from_counts(counts: PairedCounts, *, alpha: float = FAMILY_ALPHA, margin: float) -> QualityVerdict:
    """The paired verdict of a table (see the module's doc for the rule)."""
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be between 0 and 0.5, got {alpha}")
    if not 0 < margin < 1:
        raise ValueError(f"margin must be between 0 and 1 (accuracy points as a fraction), got {margin}")
    n, b, c = counts.n, counts.only_gated, counts.only_reference
    if n == 0:
        raise ValueError("no items: the two runs share no answered item")
    acc, ref_acc = (counts.both + b) / n, (counts.both + c) / n
    diff = (b - c) / n
    low, high = tango_interval(b, c, n, 1 - 2 * alpha)
    p = mcnemar_exact_p(b, c)
    shown = f"{(1 - 2 * alpha) * 100:g} % interval [{_points(low)}, {_points(high)}]"
    head = (f"{acc * 100:.1f} % against {ref_acc * 100:.1f} % on {n} items ({_points(diff)}; "
            f"right only here: {b}, only in the reference: {c})")
    verdict: Verdict
    if p < alpha:
        verdict = "worse" if c > b else "better"
        why = f"{verdict}: {head}, McNemar's exact p = {p:.3g} < {alpha:g}"
    elif -margin < low and high < margin:
        verdict = "equivalent"
        why = f"equivalent within \u00b1{margin * 100:g} points: {head}; its {shown} lies inside the margin"
    else:
        verdict = "cannot tell"
        why = (f"cannot tell: {head}; McNemar's exact p = {p:.3g}, and its {shown} is not inside "
               f"\u00b1{margin * 100:g} points (more items would decide it)")
    return QualityVerdict(verdict=verdict, why=why, items=n, counts=counts, accuracy=acc, reference_accuracy=ref_acc,
                          difference=diff, low=low, high=high, p_value=p, alpha=alpha, margin=margin)


def agreement(a: Mapping[str, str], b: Mapping[str, str]) -> float | None:
    """The fraction of the items both answered whose values (first tokens, or normalized answers) are
    equal; None when they share no item."""
    shared = set(a) & set(b)
    if not shared:
        return None
    return sum(a[k] == b[k] for k in shared) / len(shared)


def paired_verdict(gated: Mapping[str, bool], reference: Mapping[str, bool], *, margin: float,
                   alpha: float = FAMILY_ALPHA, first_tokens: tuple[Mapping[str, str], Mapping[str, str]] | None = None,
                   answers: tuple[Mapping[str, str], Mapping[str, str]] | None = None) -> QualityVerdict:
    """The verdict of a gated trial against its reference from each item's correctness (item id ->
    correct), both over the same ids; `first_tokens` and `answers` (gated's, reference's: item id ->
    text), where given, add how often the two agree."""
    out = verdict_from_counts(paired_counts(gated, reference), alpha=alpha, margin=margin)
    return out.model_copy(update={
        "first_token_agreement": agreement(*first_tokens) if first_tokens else None,
        "answer_agreement": agreement(*answers) if answers else None,
    })
