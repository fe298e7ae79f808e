"""One metric over one trial's repeats: the sample model, cleaning, mean and interval."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

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
    from scipy import stats as _st  # seconds to import: only an interval over repeats pays for it

    half = float(_st.t.ppf(0.5 + confidence / 2, df=n - 1)) * sem
    return Summary(n=n, n_dropped=dropped, mean=mean, std=std, sem=sem, confidence=confidence,
                   ci_low=mean - half, ci_high=mean + half, has_interval=True)
