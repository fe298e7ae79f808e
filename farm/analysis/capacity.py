"""Capacity under an SLO: the search for the most load a trial serves within its limits (pure).

The actor asks `next_load` which load to run next, given the runs so far, until it says None;
`verdict` turns the same runs into the trial's capacity. Both are functions of their arguments
alone, so a stored sweep's capacities are recomputed from its runs, never remembered.

The search: the ladder's loads in order, once each, until one breaks the SLO or throughput stops
growing with the load while P95 TTFT grows (past saturation more load only queues); then bisection between the
highest load that met the SLO and the lowest that broke it, until the interval is as narrow as
the profile's resolution (neighbouring whole numbers for concurrency) or the run budget is spent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping

from farm.study.sections import CapacitySpec, SLOSpec

Stop = Literal["bracketed", "ladder_top", "saturated", "budget", "fails_at_lowest", "no_runs"]

STOP_WORDS = {
    "bracketed": "between a load that met the SLO and one that broke it",
    "ladder_top": "the top of the ladder met the SLO: capacity is at least that",
    "saturated": "throughput stopped growing while latency grew: more load only queues",
    "budget": "the run budget ran out before the interval narrowed",
    "fails_at_lowest": "the lowest load already breaks the SLO",
    "no_runs": "no run measured",
}


@dataclass(frozen=True)
class Miss:
    """One limit a run broke: what was measured, the limit, and how far off."""

    limit: str            # "P95 TTFT", "mean TPOT", "success rate", "goodput share"
    measured: float | None
    allowed: float
    unit: str             # "ms" or "%"
    higher_is_worse: bool = True

    @property
    def relative(self) -> float:
        """How far off, as a share of the limit (inf when not measured)."""
        if self.measured is None:
            return float("inf")
        gap = self.measured - self.allowed if self.higher_is_worse else self.allowed - self.measured
        return gap / self.allowed if self.allowed else float("inf")

    def text(self) -> str:
        if self.measured is None:
            return f"{self.limit} not measured"
        if self.unit == "%":
            return (f"{self.limit} {self.measured:.1%} < {self.allowed:.1%} "
                    f"(short by {(self.allowed - self.measured) * 100:.1f} points)")
        sign = ">" if self.higher_is_worse else "<"
        return f"{self.limit} {self.measured:.0f} {self.unit} {sign} {self.allowed:g} {self.unit} (+{self.relative:.0%})"


@dataclass(frozen=True)
class Point:
    """One run of the search: its load, whether it met the SLO, and the numbers on the curve."""

    load: float
    meets: bool
    misses: tuple[Miss, ...] = ()
    total_tps: float | None = None
    output_tps: float | None = None
    request_rate: float | None = None
    goodput_rps: float | None = None
    ttft_p95_ms: float | None = None
    tpot_mean_ms: float | None = None
    success_rate: float | None = None


def slo_misses(metrics: Mapping[str, float], slo: SLOSpec, floor: float) -> list[Miss]:
    """The limits of `slo` one run's metrics break (`floor`: the success rate required)."""
    out = []
    for name, limit, label in slo.latency_limits():
        value = metrics.get(name)
        if value is None or value > limit:
            out.append(Miss(label, value, limit, "ms"))
    rate = metrics.get("success_rate")
    if rate is None or rate < floor:
        out.append(Miss("success rate", rate, floor, "%", higher_is_worse=False))
    if slo.min_goodput_share is not None:
        share = metrics.get("slo_attainment")
        if share is None or share < slo.min_goodput_share:
            out.append(Miss("goodput share", share, slo.min_goodput_share, "%", higher_is_worse=False))
    return out


def point(load: float, metrics: Mapping[str, float] | None, ok: bool, slo: SLOSpec, floor: float) -> Point:
    """One run as a point of the curve; a failed run (no metrics) breaks the SLO at its load."""
    m = metrics or {}
    misses = tuple(slo_misses(m, slo, floor)) if ok and metrics else (Miss("success rate", None, floor, "%", False),)
    return Point(load=load, meets=not misses, misses=misses, total_tps=m.get("total_tps"), output_tps=m.get("output_tps"),
                 request_rate=m.get("request_throughput"), goodput_rps=m.get("goodput_rps"),
                 ttft_p95_ms=m.get("ttft_p95_ms"), tpot_mean_ms=m.get("tpot_mean_ms"), success_rate=m.get("success_rate"))


def _saturated(spec: CapacitySpec, points: list[Point]) -> bool:
    """The last two ladder loads met the SLO, and the step between them gained too little throughput
    for the load it added while P95 TTFT grew."""
    ladder = [p for p in points if p.load in spec.ladder]
    if len(ladder) < 2 or not (ladder[-1].meets and ladder[-2].meets):
        return False
    prev, last = ladder[-2], ladder[-1]
    if None in (prev.total_tps, last.total_tps, prev.ttft_p95_ms, last.ttft_p95_ms):
        return False
    # Relative to the load's own step: doubling the load for 8 % more throughput is saturation; a
    # ladder of close loads (21, 22) gains little throughput per step without being saturated.
    wanted = spec.saturation_gain * (last.load / prev.load - 1)
    return last.total_tps < prev.total_tps * (1 + wanted) and last.ttft_p95_ms > prev.ttft_p95_ms


def _bracket(points: list[Point]) -> tuple[float | None, float | None]:
    """(highest load that met the SLO below the lowest that broke it, that lowest broken load).

    A load that met the SLO above one that broke it (noise) does not count: the capacity is the
    top of the run of met loads from below."""
    broken = [p.load for p in points if not p.meets]
    high = min(broken) if broken else None
    met = [p.load for p in points if p.meets and (high is None or p.load < high)]
    return (max(met) if met else None), high


def _narrow(spec: CapacitySpec, low: float, high: float) -> bool:
    if spec.over == "concurrency" and high - low <= 1:
        return True
    return (high - low) / low <= spec.resolution


def _midpoint(spec: CapacitySpec, low: float, high: float) -> float:
    mid = (low + high) / 2
    if spec.over == "concurrency":
        return float(int(mid))
    return round(mid, 6)


def _ladder_next(spec: CapacitySpec, points: list[Point]) -> float | None:
    tried = {p.load for p in points}
    if any(not p.meets for p in points) or _saturated(spec, points):
        return None
    return next((load for load in spec.ladder if load not in tried), None)


def next_load(spec: CapacitySpec, points: list[Point]) -> float | None:
    """The load of the search's next run, or None when the search is over."""
    if len(points) >= spec.max_runs:
        return None
    if (load := _ladder_next(spec, points)) is not None:
        return load
    low, high = _bracket(points)
    if low is None or high is None or _narrow(spec, low, high):
        return None
    mid = _midpoint(spec, low, high)
    return mid if low < mid < high and mid not in {p.load for p in points} else None


@dataclass
class CapacityVerdict:
    """A trial's capacity on one capacity profile, with the interval and the curve behind it."""

    over: str
    capacity: float | None  # highest load that met the SLO (None: not even the lowest)
    high: float | None      # lowest load that broke it (None: none did)
    stop: Stop
    curve: list[Point]
    at: Point | None = None     # the run at the capacity
    lowest: Point | None = None  # the run at the lowest load tried (what a miss is measured on)

    @property
    def interval_text(self) -> str:
        if self.capacity is None:
            return f"< {self.lowest.load:g}" if self.lowest else "-"
        return f"[{self.capacity:g}, {self.high:g})" if self.high is not None else f">= {self.capacity:g}"


def verdict(spec: CapacitySpec, points: list[Point]) -> CapacityVerdict:
    """The capacity the runs so far show, and why the search stopped (or would)."""
    curve = sorted(points, key=lambda p: p.load)
    if not curve:
        return CapacityVerdict(spec.over, None, None, "no_runs", [])
    low, high = _bracket(points)
    lowest = curve[0]
    if low is None:
        return CapacityVerdict(spec.over, None, high, "fails_at_lowest", curve, lowest=lowest)
    at = max((p for p in points if p.load == low), key=lambda p: p.total_tps or 0.0)
    if high is None:
        stop: Stop = "saturated" if _saturated(spec, points) else "ladder_top"
        if stop == "ladder_top" and low < spec.ladder[-1] and len(points) >= spec.max_runs:
            stop = "budget"
    else:
        stop = "bracketed" if _narrow(spec, low, high) or next_load(spec, points) is None and len(points) < spec.max_runs \
            else "budget"
    return CapacityVerdict(spec.over, low, high, stop, curve, at=at, lowest=lowest)
