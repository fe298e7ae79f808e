"""Pareto front of throughput and latency, and warnings for a winner at the edge of the grid (issue 7 point 6)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import Field

from farm.analysis.stats.summary import _Model


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
