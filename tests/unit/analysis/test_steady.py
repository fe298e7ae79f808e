"""The steady-state throughput of a run (farm/analysis/steady.py), on a real guidellm 0.8.1 report with
its per-request records: 96 requests at concurrency 8 of a mock-server with spread output lengths
(4 - 160 tokens, TTFT 60 ms, ITL 8 +- 2 ms), made once by guidellm against `guidellm mock-server`
(2026-12-06, a loaded 2-core machine) and kept with each request's timings and token counts only
(its text dropped). guidellm lost one of the 96 requests (95 processed, one "processing", no limit
reached): the same report shows the loss."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES
from farm.analysis.results import parse_report, slim_report, steady_of
from farm.analysis.steady import MIN_WINDOW_SHARE, Request, requests_of, steady_state, tokens_in

REPORT = FIXTURES / "guidellm-0.8.1-mock-report-requests.json"


@pytest.fixture(scope="module")
def raw() -> dict:
    return json.loads(REPORT.read_text())


def _in_flight(requests: list[Request], t: float) -> int:
    return sum(1 for r in requests if r.start <= t < r.end)


def test_the_window_is_where_the_client_held_its_concurrency(raw):
    bench = raw["benchmarks"][0]
    reqs = requests_of(bench)
    assert len(reqs) == 95 and all(r.ok for r in reqs)
    steady = steady_of(bench)
    assert steady.concurrency == bench["config"]["strategy"]["max_concurrency"] == 8
    # it opens when the 8th request is in flight, and closes when the last one is sent
    assert _in_flight(reqs, steady.opened_at) == 8 and _in_flight(reqs, steady.opened_at - 1e-6) < 8
    assert steady.closed_at == max(r.start for r in reqs)
    # the ramp-up and the drain are outside it: before, fewer than 8 had started; after, nothing starts
    assert sum(1 for r in reqs if r.start < steady.opened_at) <= 8
    assert steady.window_s == pytest.approx(steady.closed_at - steady.opened_at)
    assert MIN_WINDOW_SHARE * bench["duration"] < steady.window_s < bench["duration"]


def test_steady_tps_is_the_tokens_in_the_window_over_its_length(raw):
    bench = raw["benchmarks"][0]
    steady = steady_of(bench)
    reqs = requests_of(bench)
    prompt, output = tokens_in(reqs, steady.opened_at, steady.closed_at)
    assert steady.tps == pytest.approx((prompt + output) / steady.window_s)
    assert steady.output_tps == pytest.approx(output / steady.window_s)
    # a request wholly inside the window counts whole: every token of the requests that started
    # and ended in it, at least
    inside = [r for r in reqs if steady.opened_at <= r.start and r.end <= steady.closed_at]
    assert output >= sum(r.output_tokens for r in inside) and prompt >= sum(r.prompt_tokens for r in inside)
    # and no more than every token of the run
    assert output <= sum(r.output_tokens for r in reqs)
    # the drain (few requests left, the longest outputs) is slower than the window: the totals-based
    # rate, over the whole run, is below the steady one
    totals = bench["metrics"]
    total_tps = (totals["prompt_token_count"]["successful"]["total_sum"]
                 + totals["output_token_count"]["successful"]["total_sum"]) / bench["duration"]
    assert steady.tps > total_tps


def test_the_parser_records_it_beside_the_totals_based_rate(raw):
    metrics, _ = parse_report(raw, total_requests=96)
    steady = steady_of(raw["benchmarks"][0])
    assert metrics.steady_tps == pytest.approx(steady.tps) and metrics.steady_output_tps == pytest.approx(steady.output_tps)
    assert metrics.steady_window_s == pytest.approx(steady.window_s)
    assert metrics.total_tps != metrics.steady_tps  # the seed's number stays as it was


def test_a_lost_request_is_lost_and_not_a_success(raw):
    metrics, _ = parse_report(raw, total_requests=96)
    state = raw["benchmarks"][0]["scheduler_state"]
    assert (state["created_requests"], state["processed_requests"], state["processing_requests"]) == (96, 95, 1)
    assert metrics.successful_requests == 95 and metrics.errored_requests == metrics.incomplete_requests == 0
    assert metrics.client_lost_requests == 1 and metrics.success_rate == pytest.approx(95 / 96)


def test_a_slimmed_report_has_no_steady_rate_and_says_why(raw):
    slim = slim_report(raw)
    metrics, _ = parse_report(slim, total_requests=96)
    assert metrics.steady_tps is None and metrics.total_tps > 0
    assert steady_of(slim["benchmarks"][0]).why == "the report holds no per-request timings"


def test_a_run_that_never_held_its_concurrency_has_no_steady_state():
    # four requests, one after the other, at a concurrency of 2: never two in flight
    reqs = [Request(start=i, end=i + 0.9, first_token=i + 0.1, last_token=i + 0.9, prompt_tokens=10,
                    output_tokens=9) for i in range(4)]
    steady = steady_state(reqs, 2)
    assert steady.tps is None and "never reached the run's concurrency (2)" in steady.why


def test_a_window_too_short_to_be_a_state_is_none():
    # every request sent at once (requests = concurrency): the window closes as it opens
    reqs = [Request(start=0.0, end=1.0 + i, first_token=0.1, last_token=1.0 + i, prompt_tokens=10, output_tokens=10)
            for i in range(4)]
    steady = steady_state(reqs, 4)
    assert steady.tps is None and "no steady state" in steady.why


def test_tokens_are_spread_from_first_to_last_token():
    # two streams, each request 1 s long, first token at +0.1 s, 11 output tokens, 100 prompt tokens;
    # the window [1, 3] holds requests 2 - 5 whole and nothing of 0, 1, 6, 7
    reqs = [Request(start=s, end=s + 1.0, first_token=s + 0.1, last_token=s + 1.0, prompt_tokens=100,
                    output_tokens=11) for s in (0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0)]
    steady = steady_state(reqs, 2, duration_s=4.0)
    assert (steady.opened_at, steady.closed_at) == (0.0, 3.0)
    # in [0, 3]: requests at 0, 1 and 2 whole (6 x 111 tokens), the two at 3 not yet
    assert steady.tps == pytest.approx(6 * 111 / 3.0)
    # half of a request's tokens after its first, for a window that cuts it in half
    prompt, output = tokens_in([reqs[0]], 0.0, 0.55)
    assert prompt == 100 and output == pytest.approx(1 + 10 * 0.5)
