"""The capacity search (farm/analysis/capacity.py): which load comes next, and what the runs say."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from farm.analysis import capacity as cap
from farm.study.sections import CapacitySpec, SLOSpec

SLO = SLOSpec(ttft_p95_ms_max=500, tpot_mean_ms_max=50, min_success_rate=0.9)


def served(capacity: float, *, service_ms: float = 400, flat_after: float | None = None):
    """A server with a known capacity: below it TTFT stays at 200 ms; above it requests queue."""
    def metrics(load: float) -> dict:
        busy = min(load, flat_after if flat_after is not None else capacity)
        queued = load > capacity
        return {"ttft_p95_ms": 200 + (service_ms if queued else 0) + load, "tpot_mean_ms": 20.0, "success_rate": 1.0,
                "total_tps": 100.0 * busy, "request_throughput": busy}
    return metrics


def search(spec: CapacitySpec, metrics) -> list[cap.Point]:
    points: list[cap.Point] = []
    while (load := cap.next_load(spec, points)) is not None:
        assert load not in {p.load for p in points}, "a load is never run twice"
        points.append(cap.point(load, metrics(load), True, SLO, 0.9))
    return points


ladders = st.lists(st.integers(1, 64), min_size=1, max_size=6, unique=True).map(sorted)


@settings(max_examples=200, deadline=None)
@given(ladder=ladders, true=st.integers(1, 80), budget=st.integers(1, 12))
def test_the_interval_holds_the_true_capacity_within_the_budget(ladder, true, budget):
    spec = CapacitySpec(over="concurrency", ladder=ladder, max_runs=budget)
    points = search(spec, served(true))
    v = cap.verdict(spec, points)
    assert len(points) <= budget
    if v.capacity is None:
        assert true < ladder[0] or v.stop == "no_runs"
        assert len(points) == 1  # the lowest load broke the SLO: nothing above it is tried
    else:
        assert v.capacity <= true  # every load up to the capacity met the SLO
        assert v.high is None or true < v.high


@settings(max_examples=100, deadline=None)
@given(ladder=ladders, true=st.integers(1, 80))
def test_with_enough_runs_concurrency_is_found_exactly(ladder, true):
    spec = CapacitySpec(over="concurrency", ladder=ladder, max_runs=len(ladder) + 8, resolution=0.01)
    v = cap.verdict(spec, search(spec, served(true)))
    if ladder[0] <= true < ladder[-1]:
        assert v.capacity == true and v.high == true + 1 and v.stop == "bracketed"
    elif true >= ladder[-1]:
        assert v.capacity == ladder[-1] and v.high is None and v.stop == "ladder_top"


def test_ladder_then_bisection():
    spec = CapacitySpec(over="concurrency", ladder=[1, 2, 4, 8], max_runs=8)
    assert [p.load for p in search(spec, served(5))] == [1, 2, 4, 8, 6, 5]


def test_a_rate_search_stops_at_its_resolution():
    spec = CapacitySpec(over="rate", ladder=[1, 10], max_runs=20, resolution=0.05)
    v = cap.verdict(spec, search(spec, served(3.3)))
    assert v.capacity <= 3.3 < v.high and (v.high - v.capacity) / v.capacity <= 0.05


def test_past_saturation_the_ladder_stops_even_when_the_slo_still_holds():
    spec = CapacitySpec(over="concurrency", ladder=[1, 2, 4, 8, 16], max_runs=8)
    # throughput stops at 2 while P95 TTFT creeps up, inside the SLO: more load only queues
    points = search(spec, served(100, flat_after=2))
    v = cap.verdict(spec, points)
    assert [p.load for p in points] == [1, 2, 4]
    assert v.stop == "saturated" and v.capacity == 4 and v.high is None


def test_a_failed_run_breaks_the_slo_at_its_load():
    p = cap.point(4, None, False, SLO, 0.9)
    assert not p.meets


def test_misses_say_by_how_much():
    misses = cap.slo_misses({"ttft_p95_ms": 2340.0, "tpot_mean_ms": 40.0, "success_rate": 0.8}, SLO, 0.9)
    texts = [m.text() for m in misses]
    assert texts == ["P95 TTFT 2340 ms > 500 ms (+368%)", "success rate 80.0% < 90.0% (short by 10.0 points)"]


def test_goodput_share_counts_where_set():
    slo = SLOSpec(ttft_p95_ms_max=500, goodput=True, min_goodput_share=0.95)
    ok = {"ttft_p95_ms": 100.0, "success_rate": 1.0}
    assert [m.limit for m in cap.slo_misses({**ok, "slo_attainment": 0.9}, slo, 0.9)] == ["goodput share"]
    assert cap.slo_misses({**ok, "slo_attainment": 0.97}, slo, 0.9) == []


@pytest.mark.parametrize("ladder, why", [([4, 2], "must rise"), ([1.5, 3], "whole numbers")])
def test_bad_ladders_are_refused(ladder, why):
    with pytest.raises(ValueError, match=why):
        CapacitySpec(over="concurrency", ladder=ladder)
