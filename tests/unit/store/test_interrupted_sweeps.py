"""A sweep whose driver is gone looks interrupted (issue 51 item 6), on a real SQLite MLflow store
written by farm's own writer: the driver records where it runs and beats; the next command that
reads the sweep (here `farm status`, the real CLI) marks a sweep still "running" interrupted when
its driver is a dead process of this host, or has sent no heartbeat for longer than
`DRIVER_GONE_S` (a driver on another host), and says so with the command that resumes it. A live
driver's sweep, and one stored before drivers beat, stay running. The end-to-end case, a real
driver killed with SIGKILL mid-sweep, is tests/e2e/test_interrupted_sweep.py."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time

import pytest
from mlflow.entities import RunTag
from mlflow.tracking import MlflowClient

from conftest import run_farm
from farm.store import schema as S
from farm.store import tracking
from farm.study.grid import expand
from farm.study.load import load_study
from sweeptools import write_study

COMMAND = "farm sweep --config s.yaml --grid g"


@pytest.fixture
def stored(tmp_path):
    study = load_study(str(write_study(tmp_path / "s.yaml", name="gone", grid="g",
                                       blocks=[{"engine": "mock", "models": ["tiny"], "name": "a"}])))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _, sweep_id = tracking.start_sweep(uri, "gone", study, "g", expand(study, "g"), command=COMMAND, repeats=1)
    return tmp_path, uri, sweep_id


def _driver(uri, sweep_id, where: str, beat_age_s: float, namespace: str | None = None) -> None:
    """The tags a driver at `where` (HOST:PID) writes, its last beat `beat_age_s` ago; in this
    process's PID namespace unless another is named."""
    space = tracking.pid_namespace() if namespace is None else namespace
    MlflowClient(uri).log_batch(sweep_id, tags=[RunTag(S.DRIVER_TAG, where), RunTag(S.DRIVER_PID_NS_TAG, space),
                                                RunTag(S.HEARTBEAT_TAG, f"{time.time() - beat_age_s:.0f}")])


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _status(tmp, uri, sweep_id):
    proc = run_farm("status", sweep_id, "--tracking-uri", uri, cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.parametrize("where, age, why", [
    # a dead process of this host: known at once, whatever its heartbeat says
    ("{host}:{dead}", 5, "its driver (process {dead} on {host}) is gone; last heartbeat "),
    # a driver on another host, silent for longer than DRIVER_GONE_S: cannot be asked, only timed
    ("head-node:4242", S.DRIVER_GONE_S + 60, "its driver (head-node:4242) sent no heartbeat for "),
    # a live process of this host that stopped beating (a hung driver, or its pid taken by another)
    ("{host}:{me}", S.DRIVER_GONE_S + 60, "its driver ({host}:{me}) sent no heartbeat for "),
], ids=["dead-process-here", "silent-driver-elsewhere", "silent-process-here"])
def test_a_sweep_whose_driver_is_gone_is_marked_interrupted_with_its_resume_command(stored, where, age, why):
    tmp, uri, sweep_id = stored
    fill = {"host": socket.gethostname(), "dead": _dead_pid(), "me": os.getpid()}
    _driver(uri, sweep_id, where.format(**fill), age)
    assert MlflowClient(uri).get_run(sweep_id).info.status == "RUNNING"
    lines = _status(tmp, uri, sweep_id)
    assert lines[0].endswith(": interrupted"), lines
    assert lines[2].startswith("interrupted: " + why.format(**fill)), lines
    assert lines[3] == f"resume with: {COMMAND} --resume {sweep_id}", lines
    run = MlflowClient(uri).get_run(sweep_id)  # marked in MLflow: its UI shows it too
    assert run.info.status == "KILLED" and run.data.tags[S.STATUS_TAG] == "interrupted"
    assert run.data.tags[S.INTERRUPTED_TAG] == lines[2].removeprefix("interrupted: ")
    assert _status(tmp, uri, sweep_id)[:4] == lines[:4]  # read again: the same answer, from the mark


@pytest.mark.parametrize("where, age, namespace", [
    ("{host}:{me}", 5, None),  # this test's own process: alive and beating
    ("head-node:4242", 5, None),  # elsewhere, beating
    (None, None, None),  # stored before drivers beat: nothing to judge by
    # a pid that is no process here, but of another PID namespace on a host of the same name (a
    # container beside this one): not asked, and it beats
    ("{host}:{dead}", 5, "pid:[1]"),
], ids=["alive-here", "beating-elsewhere", "no-heartbeat", "another-pid-namespace"])
def test_a_sweep_that_may_still_have_its_driver_stays_running(stored, where, age, namespace):
    tmp, uri, sweep_id = stored
    if where is not None:
        _driver(uri, sweep_id, where.format(host=socket.gethostname(), me=os.getpid(), dead=_dead_pid()), age, namespace)
    lines = _status(tmp, uri, sweep_id)
    assert lines[0].endswith(": running") and not any(line.startswith(("interrupted", "resume")) for line in lines)
    assert MlflowClient(uri).get_run(sweep_id).info.status == "RUNNING"


def test_a_store_on_read_only_media_shows_the_interruption_and_is_not_written(stored):
    """`farm status` only reads: where the store cannot be written (the immutable attribute, which
    holds for root too, or file modes), the sweep is shown interrupted and the store is unchanged."""
    tmp, uri, sweep_id = stored
    _driver(uri, sweep_id, "head-node:4242", S.DRIVER_GONE_S + 60)
    db = tmp / "mlflow.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    if os.geteuid() == 0:
        made = subprocess.run(["chattr", "+i", str(db), str(tmp)], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"root, and no immutable attribute here ({made.stderr.decode().strip()[:80]})")
        undo = lambda: subprocess.run(["chattr", "-i", str(db), str(tmp)], check=True)  # noqa: E731
    else:
        db.chmod(0o444)
        tmp.chmod(0o555)
        undo = lambda: (tmp.chmod(0o755), db.chmod(0o644))  # noqa: E731
    try:
        lines = _status(tmp, uri, sweep_id)
    finally:
        undo()
    assert lines[0].endswith(": interrupted") and lines[3].startswith("resume with: "), lines
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert MlflowClient(uri).get_run(sweep_id).info.status == "RUNNING"  # not written: marked by the next writer
