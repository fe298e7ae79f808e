"""The rules behind failures, retries, resume and secrets, as pure functions (fast; the slow tests
run them for real)."""

from __future__ import annotations

import copy
import json

import pytest

from conftest import FIXTURES
from farm.analysis.outcome import FINISHED, TRANSIENT
from farm.analysis.results import Status, stopped_by_time_limit


def test_only_what_a_second_attempt_can_fix_is_transient():
    assert TRANSIENT == {Status.node_lost, Status.port_in_use, Status.connection_error}
    for deterministic in (Status.invalid_flags, Status.oom, Status.engine_crashed, Status.timeout,
                          Status.low_success_rate, Status.engine_failed_to_start, Status.dataset_missing):
        assert deterministic not in TRANSIENT and deterministic in FINISHED
    # resume runs again what has no final answer: lost, cancelled, or out of retries
    assert not (FINISHED & (TRANSIENT | {Status.cancelled}))


def test_a_run_ended_by_its_time_limit_is_told_from_guidellm_s_report():
    report = json.loads((FIXTURES / "guidellm-0.8.1-mock-report.json").read_text())
    assert not stopped_by_time_limit(report)  # ended by max_requests
    timed = copy.deepcopy(report)
    timed["benchmarks"][-1]["scheduler_state"]["end_processing_constraints"] = {
        "max_duration": {"metadata": {"max_duration": 8.0, "duration_exceeded": True}}}
    assert stopped_by_time_limit(timed)
    assert not stopped_by_time_limit({}) and not stopped_by_time_limit({"benchmarks": []})


def test_the_study_snapshot_masks_secret_env_and_flags():
    from farm.secrets import SECRET_MASK, redact_study
    from farm.study.spec import Study

    study = Study.model_validate({
        "name": "s", "primary_profile": "p",
        "models": {"m": "some/model"},
        "engines": {"mock": {"env": {"HF_TOKEN": "hf_abcdefgh", "MY_SERVICE": "s3cr3t-value", "PLAIN": "1"},
                             "secret_env": ["MY_SERVICE"], "secret_flags": ["access-code"],
                             "flags": {"api-key": "sk-123456", "ttft-ms": 5}}},
        "profiles": {"p": {"data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 4}, "requests": 2}},
        "grids": {"g": {"blocks": [{"engine": "mock", "models": ["m"], "flags": {"access-code": "code-7654321"},
                                    "axes": {"itl-ms": [1, 2]}}]}},
    })
    data = redact_study(study)
    engine = data["engines"]["mock"]
    assert engine["env"] == {"HF_TOKEN": SECRET_MASK, "MY_SERVICE": SECRET_MASK, "PLAIN": "1"}
    assert engine["flags"] == {"api-key": SECRET_MASK, "ttft-ms": 5}
    assert data["grids"]["g"]["blocks"][0]["flags"] == {"access-code": SECRET_MASK}
    text = json.dumps(data)
    assert not any(s in text for s in ("hf_abcdefgh", "s3cr3t-value", "sk-123456", "code-7654321"))
    assert Study.model_validate(data)  # the snapshot stays a valid study (farm report reads it back)


@pytest.mark.parametrize("command,expected", [
    ("farm sweep --grid smoke", "farm sweep --grid smoke --resume abc"),
    ("farm sweep --grid smoke --resume old --repeats 2", "farm sweep --grid smoke --repeats 2 --resume abc"),
    ("farm sweep --resume=old --grid 'a b'", "farm sweep --grid 'a b' --resume abc"),
])
def test_the_resume_command_replaces_an_earlier_resume(command, expected):
    from farm.run.sweep_view import resume_command

    assert resume_command(command, "abc") == expected


@pytest.mark.parametrize("uri,path", [
    ("sqlite:///mlflow.db", "mlflow.db"),
    ("sqlite:////abs/dir/mlflow.db", "/abs/dir/mlflow.db"),
    ("http://host:5000", None),
    ("sqlite:///:memory:", None),
])
def test_sqlite_store_paths(uri, path):
    from farm.store.location import sqlite_path

    got = sqlite_path(uri)
    assert (str(got) if got else None) == path
