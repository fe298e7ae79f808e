"""Interrupted sweeps look interrupted (issue 51 item 6), on a real mock sweep: a driver sent
SIGTERM (a `kill`, Ray's job stop) marks its sweep killed at once, as Ctrl-C does, and prints the
resume command. A driver killed outright (SIGKILL, no handler runs), whose sweep the next `farm
status` marks interrupted, is the first driver of tests/e2e/test_sweep_lease.py (one sweep for both)."""

from __future__ import annotations

import signal

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_farm
from sweeptools import profile_started, slow_mock_sweep, start_farm, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def sweep(tmp_path, ray_head):
    """On the session's Ray head (--address): what is under test is the driver's end, not Ray's own
    start or stop with it (test_resume's Ctrl-C'd driver starts and ends a Ray of its own)."""
    tmp, uri, args, ids = slow_mock_sweep(tmp_path, name="gone", trials="ab", itl_ms=400)
    return tmp, uri, [*args, "--address", ray_head], ids


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
