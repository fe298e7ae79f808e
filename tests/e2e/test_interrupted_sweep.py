"""Interrupted sweeps look interrupted (issue 51 item 6), on a real mock sweep: a driver killed
outright (SIGKILL, no handler runs) leaves its sweep's MLflow run "running"; the next `farm
status` sees its driver is a dead process of this host, marks the run interrupted (MLflow status
KILLED) and prints the command that resumes it. A driver sent SIGTERM (a `kill`, Ray's job stop)
marks its sweep killed at once, as Ctrl-C does, and prints the resume command."""

from __future__ import annotations

import signal

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_farm
from sweeptools import profile_started, slow_mock_sweep, start_farm, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def sweep(tmp_path):
    return slow_mock_sweep(tmp_path, name="gone", trials="ab", itl_ms=400)


def _start_and_signal(tmp, args, ids, sig, log_name):
    log = tmp / log_name
    driver = start_farm(*args, cwd=tmp, log=log)
    try:
        wait_until(lambda: driver.poll() is not None or any(profile_started(tmp / "w", t) for t in ids),
                   400, what="a trial's benchmark to start")
        assert driver.poll() is None, log.read_text()[-3000:]
        driver.send_signal(sig)
        driver.wait(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    return driver.returncode, log.read_text()


def _sweep_id(uri):
    (run,) = MlflowClient(uri).search_runs([e.experiment_id for e in MlflowClient(uri).search_experiments()],
                                           filter_string="tags.`farm.kind` = 'sweep'")
    return run.info.run_id


def test_a_driver_killed_outright_leaves_a_sweep_that_status_marks_interrupted(sweep):
    tmp, uri, args, ids = sweep
    code, out = _start_and_signal(tmp, args, ids, signal.SIGKILL, "killed.out")
    assert code == -signal.SIGKILL, out[-3000:]
    sweep_id = _sweep_id(uri)
    client = MlflowClient(uri)
    assert client.get_run(sweep_id).info.status == "RUNNING"  # nothing ran to say otherwise
    status = run_farm("status", sweep_id, "--tracking-uri", uri, cwd=tmp)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[0] == f"sweep {sweep_id} ({client.get_run(sweep_id).info.run_name}): interrupted", lines
    assert lines[2].startswith("interrupted: its driver (process ") and " is gone; last heartbeat " in lines[2]
    assert lines[3].startswith("resume with: farm sweep --config ") and lines[3].endswith(f"--resume {sweep_id}")
    run = client.get_run(sweep_id)
    assert run.info.status == "KILLED" and run.data.tags["farm.status"] == "interrupted"


def test_a_driver_sent_sigterm_marks_its_sweep_killed_at_once(sweep):
    tmp, uri, args, ids = sweep
    code, out = _start_and_signal(tmp, args, ids, signal.SIGTERM, "term.out")
    assert code == 130, out[-3000:]
    assert "Traceback" not in out
    sweep_id = _sweep_id(uri)
    assert f"--resume {sweep_id}" in out
    run = MlflowClient(uri).get_run(sweep_id)
    assert run.info.status == "KILLED" and run.data.tags["farm.status"] == "killed"
    status = run_farm("status", sweep_id, "--tracking-uri", uri, cwd=tmp)
    assert "resume with: " in status.stdout and status.stdout.splitlines()[0].endswith(": killed")
