"""A run's energy: joules over its window, mean and peak watts, tokens per joule (issue 50).

The node samples its GPUs' power through NVML a few times a second (actors/machine.py); a run's
joules are the power of all the trial's GPUs together integrated over exactly the run's window
(the benchmark's start and end): the trapezoid rule over the samples, the curve taken linearly
between samples and level before the first and after the last (`integrate`). A run recorded
before the sampler integrated (the committed H100 search's) kept only the min, mean and max of its
per-GPU samples: its joules are then mean W x GPUs x window, and its record says which
(`method`). Where no GPU was sampled (a CPU engine, the mock, no NVML), every field is None and
`reason` says why: never zeros.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from farm.analysis.results import GpuSamples

TRAPEZOID = "trapezoid"
MEAN_X_WINDOW = "mean_x_window"
METHOD_WORDS = {TRAPEZOID: "trapezoid over the samples", MEAN_X_WINDOW: "mean W x window"}


class RunEnergy(BaseModel):
    """One run's energy, or why it was not measured."""

    model_config = ConfigDict(extra="forbid")

    measured: bool
    reason: str | None = Field(default=None, description="Why not measured (no GPU, NVML absent, no power read).")
    joules: float | None = Field(default=None, description="Energy of the trial's GPUs over the run's window.")
    mean_w: float | None = Field(default=None, description="Mean power of the trial's GPUs together (W).")
    peak_w: float | None = Field(default=None, description="Highest power of the trial's GPUs together (W); none where "
                                 "only each GPU's own maximum was kept (several GPUs, results from before).")
    window_s: float | None = Field(default=None, description="The window the joules are over (s).")
    output_tokens_per_j: float | None = None
    total_tokens_per_j: float | None = Field(default=None, description="(prompt + output tokens) per joule.")
    method: Literal["trapezoid", "mean_x_window"] | None = Field(
        default=None, description="trapezoid: integrated over the samples' timestamps; mean_x_window: mean W x GPUs "
        "x window, where the run kept only the mean (recorded before the sampler integrated).")


def integrate(samples: list[tuple[float, float]], window: tuple[float, float]) -> float | None:
    """Joules of a power curve (time s, watts) over `window`: the trapezoid rule over the samples, the
    curve linear between them, level before the first sample and after the last; None without samples."""
    points = sorted(samples)
    if not points:
        return None
    t0, t1 = window
    if t1 <= t0:
        return 0.0

    def power_at(t: float) -> float:
        if t <= points[0][0]:
            return points[0][1]
        if t >= points[-1][0]:
            return points[-1][1]
        for (ta, pa), (tb, pb) in zip(points, points[1:]):
            if ta <= t <= tb:
                return pa if tb == ta else pa + (pb - pa) * (t - ta) / (tb - ta)
        return points[-1][1]  # not reached: t lies between the first and the last sample

    xs = [t0, *(t for t, _ in points if t0 < t < t1), t1]
    ys = [power_at(t) for t in xs]
    return sum((xb - xa) * (ya + yb) / 2 for xa, xb, ya, yb in zip(xs, xs[1:], ys, ys[1:]))


NOT_RECORDED = "not recorded: the run is from before farm sampled GPUs"


def run_energy(gpu: GpuSamples | None, *, duration_s: float | None, input_tokens: float | None,
               output_tokens: float | None, gpus: int | None = None) -> RunEnergy:
    """A run's energy from its GPU samples and its totals (tokens over the benchmark's `duration_s`)."""
    if gpu is None:
        return RunEnergy(measured=False, reason=NOT_RECORDED)
    if not gpu.measured:
        return RunEnergy(measured=False, reason=gpu.reason or "not measured")
    if gpu.power_w is None:
        return RunEnergy(measured=False, reason="NVML answered no power for these GPUs")
    n = len(gpu.gpus) or gpus or 1
    window = gpu.window_s if gpu.window_s is not None else duration_s
    if gpu.energy_j is not None:
        joules, method = gpu.energy_j, TRAPEZOID
        mean_w = joules / window if window else (gpu.power_total_w.mean if gpu.power_total_w else gpu.power_w.mean * n)
    elif window:
        mean_w, method = gpu.power_w.mean * n, MEAN_X_WINDOW
        joules = mean_w * window
    else:
        return RunEnergy(measured=False, reason="the run's window is not known: its power cannot be integrated")
    peak = gpu.power_total_w.max if gpu.power_total_w is not None else (gpu.power_w.max if n == 1 else None)
    per_j = (lambda tokens: tokens / joules if tokens is not None and joules > 0 else None)
    total = input_tokens + output_tokens if input_tokens is not None and output_tokens is not None else None
    return RunEnergy(measured=True, joules=joules, mean_w=mean_w, peak_w=peak, window_s=window,
                     output_tokens_per_j=per_j(output_tokens), total_tokens_per_j=per_j(total), method=method)
