"""Parsing a real guidellm 0.8.1 JSON report (produced once against `guidellm mock-server`)."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES
from farm.analysis.results import ReportError, parse_report

REPORT = FIXTURES / "guidellm-0.8.1-mock-report.json"


def test_parse_real_report_totals():
    raw = json.loads(REPORT.read_text())
    metrics, version = parse_report(raw, total_requests=64)
    bench = raw["benchmarks"][0]
    assert version == "0.8.1"
    assert metrics.successful_requests == bench["metrics"]["request_totals"]["successful"] == 64
    assert metrics.success_rate == 1.0
    # total_tps comes from the totals, not from guidellm's windowed rate
    prompt = bench["metrics"]["prompt_token_count"]["successful"]["total_sum"]
    output = bench["metrics"]["output_token_count"]["successful"]["total_sum"]
    assert metrics.total_tps == pytest.approx((prompt + output) / bench["duration"])
    assert metrics.output_tps == pytest.approx(output / bench["duration"])
    assert metrics.guidellm_total_tps_mean == pytest.approx(bench["metrics"]["tokens_per_second"]["successful"]["mean"])
    assert metrics.ttft_mean_ms == pytest.approx(bench["metrics"]["time_to_first_token_ms"]["successful"]["mean"])
    # TPOT as the field means it is guidellm's inter-token latency; guidellm's "time per output
    # token" (first token included) keeps a name of its own
    assert metrics.tpot_p95_ms == pytest.approx(
        bench["metrics"]["inter_token_latency_ms"]["successful"]["percentiles"]["p95"])
    assert metrics.latency_per_output_token_p95_ms == pytest.approx(
        bench["metrics"]["time_per_output_token_ms"]["successful"]["percentiles"]["p95"])
    assert metrics.latency_mean_s < 10 and metrics.ttft_mean_ms > 0


def test_success_rate_is_over_the_profiles_requests():
    metrics, _ = parse_report(REPORT, total_requests=128)
    assert metrics.success_rate == pytest.approx(0.5)


@pytest.mark.parametrize("bad", [{}, {"benchmarks": []}, {"benchmarks": [{"metrics": {}}]}])
def test_malformed_reports(bad):
    with pytest.raises(ReportError):
        parse_report(bad)


LOST = FIXTURES / "guidellm-0.8.1-mock-report-one-request-lost.json"


def test_a_request_guidellm_lost_track_of_counts_as_lost_and_the_rate_is_over_the_requests_sent():
    # A real report from a CI run (tests/unit/cli/test_partial_sweep.py, 2026-12-03): 8 requests
    # asked of a mock-server that answered all 8 with 200, and guidellm ended its benchmark with 7
    # processed and one still "processing", no limit reached (on the H200: 999 of 1,000, none
    # errored, none incomplete, recorded as a success rate of 1.0). The request is lost: recorded as
    # such, and the success rate is over the 8 sent (issue 45).
    raw = json.loads(LOST.read_text())
    state = raw["benchmarks"][0]["scheduler_state"]
    assert (state["created_requests"], state["processed_requests"], state["processing_requests"]) == (8, 7, 1)
    metrics, _ = parse_report(raw, total_requests=8)
    assert metrics.successful_requests == 7 and metrics.errored_requests == 0
    assert metrics.client_lost_requests == 1 and metrics.success_rate == pytest.approx(7 / 8)
    # without the profile's count, what guidellm sent (its own total, 7, leaves the lost one out)
    assert parse_report(raw)[0].success_rate == pytest.approx(7 / 8)
    # the throughput stays that of the 7 requests guidellm measured
    output = raw["benchmarks"][0]["metrics"]["output_token_count"]["successful"]["total_sum"]
    assert metrics.output_tps == pytest.approx(output / raw["benchmarks"][0]["duration"])


def test_requests_still_in_flight_when_a_time_limit_ends_the_run_are_failures():
    raw = json.loads(LOST.read_text())
    state = raw["benchmarks"][0]["scheduler_state"]
    state["scheduler_constraints"]["max_duration"]["metadata"]["duration_exceeded"] = True
    metrics, _ = parse_report(raw, total_requests=8)
    assert metrics.client_lost_requests == 0 and metrics.success_rate == pytest.approx(7 / 8)


def test_a_complete_run_loses_nothing():
    metrics, _ = parse_report(REPORT, total_requests=64)
    assert metrics.client_lost_requests == 0 and metrics.success_rate == 1.0
