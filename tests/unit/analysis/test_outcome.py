"""The rules that decide how a run, a trial and an attempt end (farm/analysis/outcome.py), without
Ray, an engine or guidellm: each test states what a user sees in the sweep's results."""

from __future__ import annotations

import pytest

from conftest import FIXTURES
from farm.analysis import outcome
from farm.analysis.outcome import Lost, RunFacts, judge_run, lost_by_client_only
from farm.analysis.results import ProfileRun, Status, parse_report
from farm.engines import get_engine
from farm.engines.base import Failure
from farm.study.spec import ProfileSpec
from farm.study.trial import Trial

REPORT = parse_report(FIXTURES / "guidellm-0.8.1-mock-report.json")[0]


def _profile(**extra) -> ProfileSpec:
    return ProfileSpec.model_validate({"data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 4},
                                       "requests": 10, **extra})


def _facts(**extra) -> RunFacts:
    base = dict(requests=10, max_seconds=8.0, timeout_s=128.0, min_success_rate=0.99)
    return RunFacts(**{**base, **extra})


def _metrics(ok: float, errored: float = 0, asked: float = 10):
    return REPORT.model_copy(update={"successful_requests": ok, "errored_requests": errored, "total_requests": asked,
                                     "success_rate": ok / asked})


# -- one run ---------------------------------------------------------------------------

def test_a_run_whose_client_ran_past_its_hard_limit_is_a_timeout():
    assert judge_run(_facts(client_timed_out=True)) == (Status.timeout, "ran past 128 s")
    # even when the engine died meanwhile: the client's limit is what ended it
    assert judge_run(_facts(client_timed_out=True, engine_died=True, engine_exit=-9))[0] == Status.timeout


def test_a_run_stopped_by_its_time_limit_with_nothing_done_is_a_timeout():
    status, reason = judge_run(_facts(metrics=_metrics(0), stopped_by_time_limit=True))
    assert status == Status.timeout
    assert reason == "ran past its limit of 8 s: 0 of 10 requests finished (0 succeeded)"


def test_a_run_that_finished_every_request_before_its_time_limit_fired_is_judged_on_its_numbers():
    assert judge_run(_facts(metrics=_metrics(10), stopped_by_time_limit=True)) == (Status.ok, None)


def test_a_run_below_the_success_floor_is_low_success_rate():
    status, reason = judge_run(_facts(metrics=_metrics(7, errored=3)))
    assert status == Status.low_success_rate and reason == "7 of 10 requests succeeded (70.0% < 99%)"
    assert judge_run(_facts(metrics=_metrics(7, errored=3), min_success_rate=0.5)) == (Status.ok, None)


def test_a_profile_s_slo_sets_its_own_success_floor():
    assert outcome.success_floor(_profile(), 0.99) == 0.99
    assert outcome.success_floor(_profile(slo={"min_success_rate": 0.9}), 0.99) == 0.9
    assert outcome.success_floor(_profile(slo={"ttft_p95_ms_max": 100}), 0.99) == 0.99


def test_the_client_s_hard_limit_is_the_profile_s_limit_plus_room_for_guidellm():
    assert outcome.client_timeout_s(_profile(max_seconds=8)) == 128
    assert outcome.client_timeout_s(_profile()) == 3600 + 120


@pytest.mark.parametrize("log_line,expected", [
    ("vllm: error: unrecognized arguments: --turbo", Status.engine_crashed),   # a refused flag cannot crash a served engine
    ("OSError: [Errno 98] Address already in use", Status.engine_crashed),   # nor a port it already holds
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", Status.oom),
    ("nothing the patterns know", Status.engine_crashed),
])
def test_an_engine_dying_during_a_run_is_a_crash_unless_its_log_says_oom(log_line, expected):
    classified = get_engine("vllm").classify(log_line)
    status, reason = judge_run(_facts(engine_died=True, engine_exit=1, engine_failure=classified))
    assert status == expected
    assert reason == (f"{classified.reason}: {classified.line}" if classified else "engine exited with code 1 during the run")


def test_the_same_log_line_before_the_engine_served_keeps_its_own_status():
    classified = Failure("invalid_flags", "engine refused a flag", "--turbo")
    assert outcome.engine_failure(classified, Status.engine_failed_to_start, "exited") == (
        Status.invalid_flags, "engine refused a flag: --turbo")
    assert outcome.engine_failure(None, Status.engine_failed_to_start, "exited") == (Status.engine_failed_to_start, "exited")


def test_a_client_that_lost_its_connection_to_a_live_engine_is_a_connection_error():
    log = "line 1\nhttpx.ConnectError: All connection attempts failed\nline 3\nline 4"
    status, reason = judge_run(_facts(report_error="no report", client_exit=1, client_log=log))
    assert status == Status.connection_error
    assert reason.startswith("guidellm failed (exit 1): no report; it lost its connection to the running engine (ConnectError)")
    assert reason.endswith("httpx.ConnectError: All connection attempts failed | line 3 | line 4")
    status, reason = judge_run(_facts(report_error="bad JSON", client_exit=2, client_log="Traceback\nKeyError: 'x'"))
    assert status == Status.bench_failed and reason == "guidellm failed (exit 2): bad JSON; Traceback | KeyError: 'x'"


# -- one trial -------------------------------------------------------------------------

def _run(status: Status, profile: str = "p", repeat: int = 0) -> ProfileRun:
    return ProfileRun(profile=profile, repeat=repeat, status=status, reason=None if status == Status.ok else status.value)


def test_a_trial_is_as_bad_as_its_worst_run():
    assert outcome.trial_status([_run(Status.ok), _run(Status.ok, repeat=1)]) == (Status.ok, None)
    runs = [_run(Status.low_success_rate, "a"), _run(Status.timeout, "b", 2), _run(Status.ok, "c")]
    assert outcome.trial_status(runs) == (Status.timeout, "b#2: timeout")
    runs.append(_run(Status.engine_crashed, "d", 1))
    assert outcome.trial_status(runs) == (Status.engine_crashed, "d#1: engine_crashed")
    # every pair of the order: the earlier one wins, whatever order the runs came in
    order = outcome.SEVERITY
    for i, worse in enumerate(order):
        for better in order[i + 1:]:
            assert outcome.trial_status([_run(better), _run(worse)])[0] == worse


def test_a_crash_or_oom_ends_the_trial_s_runs():
    assert outcome.STOPS_TRIAL == {Status.engine_crashed, Status.oom}


# -- retries ---------------------------------------------------------------------------

@pytest.mark.parametrize("status", sorted(Status, key=lambda s: s.value))
def test_only_transient_failures_are_retried_and_only_while_retries_last(status):
    transient = status in (Status.node_lost, Status.port_in_use, Status.connection_error)
    assert outcome.should_retry(status, attempt=1, max_retries=2) is transient
    assert outcome.should_retry(status, attempt=2, max_retries=2) is transient
    assert outcome.should_retry(status, attempt=3, max_retries=2) is False
    # the actor stores what is final; a retried failure or a cancelled trial is left to the driver / resume
    assert outcome.logged_by_actor(status) is (not transient and status != Status.cancelled)
    assert (status in outcome.FINISHED) is (not transient and status != Status.cancelled)


def _trial() -> Trial:
    return Trial(id="mock-1234abcd", engine="mock", model_key="tiny", model="tiny", profiles=["p"])


@pytest.mark.parametrize("lost,status,retried", [
    (Lost.actor, Status.node_lost, True),
    (Lost.not_stored, Status.connection_error, True),
    (Lost.farm, Status.bench_failed, False),
])
def test_a_trial_whose_actor_gave_no_result_is_a_result_all_the_same(lost, status, retried):
    res = outcome.lost_actor_result(sweep_id="s", trial=_trial(), attempt=2, previous_attempts=["attempt 1: x"],
                                    node_id="n1", lost=lost, detail="RayActorError: died", now=5.0)
    assert res.status == status and "RayActorError: died" in res.reason
    assert (res.attempt, res.node_id, res.previous_attempts, res.started_at) == (2, "n1", ["attempt 1: x"], 5.0)
    assert outcome.should_retry(res.status, res.attempt, max_retries=3) is retried


def test_the_sweep_shows_the_engine_log_only_where_the_engine_explains_the_failure():
    assert Status.oom in outcome.LOG_EXPLAINS and Status.invalid_flags in outcome.LOG_EXPLAINS
    assert not ({Status.timeout, Status.low_success_rate, Status.node_lost, Status.ok} & outcome.LOG_EXPLAINS)


def test_a_run_whose_client_lost_requests_is_judged_over_the_requests_sent():
    # the real report of 8 requests with one lost by guidellm (tests/unit/analysis/test_results.py):
    # 7 of 8 is 87.5 %, whatever the server did with the eighth, and the reason names the loss
    lost = parse_report(FIXTURES / "guidellm-0.8.1-mock-report-one-request-lost.json", 8)[0]
    status, reason = judge_run(_facts(requests=8, metrics=lost))
    assert status == Status.low_success_rate
    assert reason == "7 of 8 requests succeeded (87.5% < 99%); 1 sent and never accounted for by the client (lost)"
    # a floor it meets: ok, the lost request still recorded on the run
    assert judge_run(_facts(requests=8, metrics=lost, min_success_rate=0.8)) == (Status.ok, None)
    assert lost.client_lost_requests == 1


def test_a_run_that_only_the_client_lost_requests_of_is_one_to_run_again():
    """guidellm's race (the server answered all 8; the client accounted for 7) is the client's, not
    the engine's: the actor runs it once more (actors/bench.py _run_again). A run that also had a
    request error, or one that met its floor, is not."""
    lost = parse_report(FIXTURES / "guidellm-0.8.1-mock-report-one-request-lost.json", 8)[0]
    status, reason = judge_run(_facts(requests=8, metrics=lost))
    run = ProfileRun(profile="p", repeat=0, status=status, reason=reason, metrics=lost)
    assert lost_by_client_only(run)
    assert not lost_by_client_only(run.model_copy(update={"status": Status.ok}))
    errored = lost.model_copy(update={"errored_requests": 1.0})
    assert not lost_by_client_only(run.model_copy(update={"metrics": errored}))
    clean = parse_report(FIXTURES / "guidellm-0.8.1-mock-report.json")[0]
    assert clean.client_lost_requests == 0
    assert not lost_by_client_only(run.model_copy(update={"metrics": clean}))
