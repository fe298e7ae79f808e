"""Two samples: the relative difference of their means, its interval (Welch on the logs, Welch/Fieller or
bootstrap) and p-value."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field

from farm.analysis.stats.summary import Samples, _check_confidence, _clean, _Model


class Diff(_Model):
    """Relative difference of two trials' means (a against b) with its interval and p-value."""

    method: Literal["welch", "bootstrap", "log"] = Field(description="How the interval was computed: `log` "
                                                         "on the ratio scale (Welch on the logs), `welch` "
                                                         "(Fieller), `bootstrap`.")
    confidence: float = Field(description="Confidence level of the interval; alpha = 1 - confidence.")
    n_a: int = Field(description="Finite samples of a.")
    n_b: int = Field(description="Finite samples of b.")
    n_dropped_a: int = Field(default=0, description="Non-finite samples of a left out.")
    n_dropped_b: int = Field(default=0, description="Non-finite samples of b left out.")
    mean_a: float | None = Field(description="Mean of a; None when a has no finite sample.")
    mean_b: float | None = Field(description="Mean of b; None when b has no finite sample.")
    relative: float | None = Field(description="mean_a / mean_b - 1 (method `log`: the ratio of the geometric means "
                                   "- 1); None when undefined (no data or mean_b = 0).")
    ci_low: float | None = Field(description="Lower end of the interval of the relative difference; None if none.")
    ci_high: float | None = Field(description="Upper end of the interval of the relative difference; None if none.")
    p_value: float | None = Field(description="Two-sided Welch t-test p-value for equal means; None if untestable.")
    significant: bool | None = Field(
        description="p_value < 1 - confidence, before any multiple-comparison correction; None if untestable."
    )
    cannot_tell: bool = Field(description="True when the data cannot support a test (n < 2 on a side, no data).")
    note: str = Field(default="", description="Why the result is what it is, when that is not the ordinary case.")
    log_ratio: float | None = Field(default=None, description="Method `log`: mean log a - mean log b (the log of "
                                    "`relative` + 1); None otherwise or when untestable.")
    log_se: float | None = Field(default=None, description="Method `log`: its standard error (Welch); 0 when both "
                                 "sides are constant.")
    df: float | None = Field(default=None, description="Method `log`: Welch-Satterthwaite degrees of freedom.")
    log_sd_a: float | None = Field(default=None, description="Method `log`: standard deviation of log a (about a's "
                                   "coefficient of variation).")
    log_sd_b: float | None = Field(default=None, description="Method `log`: standard deviation of log b.")
    machines: Literal["one_machine", "within", "via_control", "no_shared_control"] | None = Field(
        default=None, description="Where the runs compared ran (farm/analysis/stats/blocks.py): one_machine (every "
        "run of both on one machine), within (the machines both ran on, the others' runs left out), via_control "
        "(across machines, each against a control on its own machine), no_shared_control (across machines with "
        "nothing to bridge them: not decided); none where machines were not asked about.")
    machines_note: str = Field(default="", description="Which machines, runs and control the comparison used.")
    control: str | None = Field(default=None, description="via_control: the control trial it went through.")


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
    method: Literal["welch", "bootstrap", "log"] = "welch",
    confidence: float = 0.95,
    seed: int = 0,
    n_resamples: int = 10_000,
) -> Diff:
    """Relative difference mean_a / mean_b - 1 with an interval and Welch's p-value.

    See the module docstring for the methods and the edge cases (n = 1, zero variance, NaN).
    """
    _check_confidence(confidence)
    if method not in ("welch", "bootstrap", "log"):
        raise ValueError(f"method must be 'log', 'welch' or 'bootstrap', got {method!r}")
    a, da = _clean(a_samples)
    b, db = _clean(b_samples)
    if method == "log" and a.size and b.size and (a.min() <= 0 or b.min() <= 0):
        # A ratio scale needs positive values: a zero or negative sample is tested on the linear scale.
        d = relative_difference(a_samples, b_samples, method="welch", confidence=confidence)
        return d.model_copy(update={"note": (d.note + "; " if d.note else "") + "a sample <= 0: the log-ratio test "
                                    "does not apply, Welch/Fieller on the means instead"})
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
    if method == "log":
        return _log_ratio(a, b, alpha, base)
    va, vb = float(a.var(ddof=1)), float(b.var(ddof=1))

    if va == 0 and vb == 0:
        if ma == mb:
            return Diff(**base, relative=0.0, ci_low=0.0, ci_high=0.0, p_value=1.0, significant=False,
                        cannot_tell=False, note="every repeat identical on both sides and equal: no difference")
        return Diff(**base, relative=rel, ci_low=rel, ci_high=rel, p_value=0.0, significant=True,
                    cannot_tell=False,
                    note="every repeat identical on both sides but the constants differ: "
                    "an exact difference for these runs (zero noise observed)")

    # scipy.stats takes seconds to import: only a comparison of repeated runs pays for it (a
    # `farm report` of single runs does not).
    from scipy import stats as _st

    # From the summary statistics: scipy's raw-sample version warns on a constant side, which is a
    # legitimate case here (one side with zero variance).
    p = float(_st.ttest_ind_from_stats(ma, math.sqrt(va), na, mb, math.sqrt(vb), nb, equal_var=False).pvalue)
    if method == "welch":
        lo, hi, note = _welch_interval(ma, va, na, mb, vb, nb, alpha)
    else:
        lo, hi, note = _bootstrap_interval(a, b, alpha, seed, n_resamples)
    return Diff(**base, relative=rel, ci_low=lo, ci_high=hi, p_value=p, significant=p < alpha,
                cannot_tell=False, note=note)


def _welch_interval(ma: float, va: float, na: int, mb: float, vb: float, nb: int,
                    alpha: float) -> tuple[float | None, float | None, str]:
    """Method `welch`: Fieller's interval of the ratio of the means (Welch's degrees of freedom), as a
    relative difference; no interval (and a note saying why) when it is unbounded."""
    from scipy import stats as _st  # imported already by the caller's test; no new cost

    df = _welch_df(va, na, vb, nb)
    t = float(_st.t.ppf(1 - alpha / 2, df))
    ci = _fieller(ma, va / na, mb, vb / nb, t)
    if ci is None:
        return None, None, "Fieller interval unbounded: the mean of b is not distinguishable from zero"
    return ci[0] - 1, ci[1] - 1, ""


def _bootstrap_interval(a: np.ndarray, b: np.ndarray, alpha: float, seed: int,
                        n_resamples: int) -> tuple[float | None, float | None, str]:
    """Method `bootstrap`: the percentile interval of the ratio of resampled means, as a relative
    difference, and a note where it is not computed or understates the interval."""
    na, nb = int(a.size), int(b.size)
    note = ""
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
    return lo, hi, note


def _log_ratio(a: np.ndarray, b: np.ndarray, alpha: float, base: dict) -> Diff:
    """Welch's test on log a against log b: the difference of the log means is the log of the ratio
    of the geometric means; its interval, back-transformed, is the ratio's."""
    la, lb = np.log(a), np.log(b)
    na, nb = la.size, lb.size
    d = float(la.mean() - lb.mean())
    va, vb = float(la.var(ddof=1)), float(lb.var(ddof=1))
    rel = math.expm1(d)
    logs = dict(log_ratio=d, log_sd_a=math.sqrt(va), log_sd_b=math.sqrt(vb))
    if va == 0 and vb == 0:
        if d == 0:
            return Diff(**base, relative=0.0, ci_low=0.0, ci_high=0.0, p_value=1.0, significant=False,
                        cannot_tell=False, log_se=0.0, df=None, **logs,
                        note="every repeat identical on both sides and equal: no difference")
        return Diff(**base, relative=rel, ci_low=rel, ci_high=rel, p_value=0.0, significant=True, cannot_tell=False,
                    log_se=0.0, df=None, **logs, note="every repeat identical on both sides but the constants differ: "
                    "an exact difference for these runs (zero noise observed)")
    from scipy import stats as _st  # seconds to import: only a comparison of repeated runs pays for it

    se = math.sqrt(va / na + vb / nb)
    df = _welch_df(va, na, vb, nb)
    p = float(2 * _st.t.sf(abs(d) / se, df))
    half = float(_st.t.ppf(1 - alpha / 2, df)) * se
    return Diff(**base, relative=rel, ci_low=math.expm1(d - half), ci_high=math.expm1(d + half), p_value=p,
                significant=p < alpha, cannot_tell=False, log_se=se, df=df, **logs)
