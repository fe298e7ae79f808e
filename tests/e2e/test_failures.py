"""Failures are results: one `farm sweep` (real Ray, MLflow, guidellm, mock-server engines) where
every way a trial can go wrong happens for real, with secrets in the engine's environment and flags.

- `healthy`: fine (the sweep still recommends it);
- `bad_flag`: the engine refuses an unknown flag (click's "No such option") -> invalid_flags, once;
- `failing`: `--fail-after-requests 3` answers HTTP 500 from the 4th request -> low_success_rate;
- `slow`: 3 s between tokens, past the profile's 8 s limit -> timeout;
- `killed`: its engine is SIGKILLed by this test in the middle of the profile -> engine_crashed.

The engine is the mock server behind tests/fixtures/engines/mock_wrapper.py, which echoes its
arguments and token-like environment into its log (as vLLM does) and accepts `--api-key` and
`--access-code`: the secrets must reach the engine and nowhere else.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from sweeptools import (alive, engine_of, port_free, profile_started, start_farm, wait_until, wrapper_launcher,
                        write_study)

pytestmark = pytest.mark.slow

HF_SECRET = "hf_studyTokenQ7xv2Lw9"
API_SECRET = "sk-apiKeyZr83Kq1mN5"
CODE_SECRET = "accessCode-Pt4u8Yc0"
ENV_SECRET = "passphrase-fromShell-Hd62Ja"
SECRETS = (HF_SECRET, API_SECRET, CODE_SECRET, ENV_SECRET)

BLOCKS = {
    "healthy": {"itl-ms": 5},
    "bad_flag": {"turbo-mode": True},
    "failing": {"fail-after-requests": 3},
    "slow": {"itl-ms": 3000},
    "killed": {"itl-ms": 1500},
}
EXPECTED = {"healthy": "ok", "bad_flag": "invalid_flags", "failing": "low_success_rate", "slow": "timeout",
            "killed": "engine_crashed"}


@pytest.fixture(scope="module")
def failures(tmp_path_factory):
    from farm.study.grid import expand
    from farm.study.load import load_study

    tmp = tmp_path_factory.mktemp("failures")
    study_file = write_study(
        tmp / "failures.yaml", name="failures", grid="failures", max_concurrent=2, max_retries=2,
        blocks=[{"engine": "mock", "models": ["tiny"], "name": name, "flags": flags} for name, flags in BLOCKS.items()],
        profile={"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8}, "rate": 1000,
                 "requests": 8, "max_concurrency": 4, "max_seconds": 8},
        engine={"launcher": wrapper_launcher(), "env": {"HF_TOKEN": HF_SECRET},
                "secret_env": ["FARM_TEST_PASSPHRASE"], "secret_flags": ["access-code"],
                "flags": {"api-key": API_SECRET, "access-code": CODE_SECRET}},
    )
    ids = {t.name: t.id for t in expand(load_study(study_file), "failures")}
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    workdir = tmp / "farm-runs"
    log = tmp / "farm.out"
    proc = start_farm("sweep", "--config", str(study_file), "--grid", "failures", "--tracking-uri", uri,
                      cwd=tmp, env={"FARM_TEST_PASSPHRASE": ENV_SECRET}, log=log)
    try:
        # Kill one engine from outside once its benchmark is under way.
        wait_until(lambda: profile_started(workdir, ids["killed"]) or proc.poll() is not None, 400,
                   what="the profile of trial 'killed' to start")
        assert proc.poll() is None, "farm sweep ended early:\n" + log.read_text()[-4000:]
        killed_pid, killed_port = engine_of(workdir, ids["killed"])
        os.killpg(killed_pid, signal.SIGKILL)
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    return dict(proc=proc, out=log.read_text(), uri=uri, tmp=tmp, ids=ids, workdir=workdir,
                killed=(killed_pid, killed_port))


def _runs(failures) -> dict[str, object]:
    client = MlflowClient(failures["uri"])
    exp = client.get_experiment_by_name("failures")
    runs = client.search_runs([exp.experiment_id], filter_string="tags.`farm.kind` = 'trial'")
    by_id = {v: k for k, v in failures["ids"].items()}
    assert sorted(r.data.tags["farm.trial_id"] for r in runs) == sorted(failures["ids"].values())  # each once
    return {by_id[r.data.tags["farm.trial_id"]]: r for r in runs}


def test_every_failure_is_a_status_with_its_reason_in_mlflow(failures):
    assert failures["proc"].returncode == 0, failures["out"][-4000:]
    runs = _runs(failures)
    assert {name: run.data.tags["farm.status"] for name, run in runs.items()} == EXPECTED
    tags = {name: run.data.tags for name, run in runs.items()}
    assert "No such option" in tags["bad_flag"]["farm.reason"] and "--turbo-mode" in tags["bad_flag"]["farm.reason"]
    assert "3 of 8 requests succeeded" in tags["failing"]["farm.reason"]
    assert "ran past its limit of 8 s" in tags["slow"]["farm.reason"]
    assert "killed by signal" in tags["killed"]["farm.reason"] or "exited with code -9" in tags["killed"]["farm.reason"]
    # nothing here is transient: each ran once
    assert {t["farm.attempt"] for t in tags.values()} == {"1"}
    assert "retry" not in failures["out"]


def test_failed_trials_carry_the_engine_log_tail(failures):
    client = MlflowClient(failures["uri"])
    runs = _runs(failures)
    for name, run in runs.items():
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        files = {a.path for a in client.list_artifacts(run.info.run_id, "files")}
        assert {"result.json", "engine-log-tail.txt"} <= artifacts and "files/engine.log" in files, name
        if name != "healthy":
            assert run.data.tags["farm.log_tail"].strip(), name
            assert run.info.status == "FAILED"
    assert "Error: No such option" in runs["bad_flag"].data.tags["farm.log_tail"]
    assert "500" in runs["failing"].data.tags["farm.log_tail"]  # the mock server's access log


def test_the_summary_shows_each_failure_and_still_recommends(failures):
    out = failures["out"]
    assert "4 trial(s) failed:" in out
    for name, status in EXPECTED.items():
        if status != "ok":
            line = next(line for line in out.splitlines() if line.strip().startswith(status) and name in line)
            assert "attempt 1" in line
    assert "| Error: No such option '--turbo-mode'" in out  # the engine's own words, under its trial
    assert "recommended: trial healthy" in out


def test_the_killed_engine_and_every_other_engine_are_gone(failures):
    pid, port = failures["killed"]
    assert not alive(pid) and port_free(port)
    client = MlflowClient(failures["uri"])
    for run in _runs(failures).values():
        result = json.loads(Path(client.download_artifacts(run.info.run_id, "result.json", str(failures["tmp"]))).read_text())
        if result["engine_pid"]:
            assert not alive(result["engine_pid"]), result["trial"]["name"]
            assert port_free(result["engine_port"])


def test_secrets_reach_the_engine_but_nothing_that_is_stored(failures):
    tmp, uri = failures["tmp"], failures["uri"]
    client = MlflowClient(uri)
    run = _runs(failures)["healthy"]
    # The engine got them (its log says so, with the values themselves masked) ...
    log = Path(client.download_artifacts(run.info.run_id, "files/engine.log", str(tmp / "check"))).read_text()
    for flag, value in (("--api-key", API_SECRET), ("--access-code", CODE_SECRET)):
        assert f"engine received {flag} sha256={hashlib.sha256(value.encode()).hexdigest()}" in log
    assert "engine env: HF_TOKEN=***" in log and "engine env: FARM_TEST_PASSPHRASE=***" in log
    assert "--api-key=*** --access-code=***" in log
    assert run.data.params["flag.api-key"] == "***" and run.data.params["flag.access-code"] == "***"
    # ... and no secret is anywhere in the store, the artifacts, the node's files or the output.
    db = (tmp / "mlflow.db").read_bytes()
    assert (tmp / "mlruns").is_dir() and (tmp / "farm-runs").is_dir()
    for secret in SECRETS:
        assert secret.encode() not in db, secret
        assert secret not in failures["out"], secret
        for path in tmp.rglob("*"):
            if path.is_file() and path.name != "failures.yaml":  # the study file is the user's own
                assert secret.encode() not in path.read_bytes(), (secret, path)
