"""One sweep, one driver (issue 51 item 1), on real SQLite MLflow stores written by farm's own
writer: the lease rule (pure), a driver refused in one line naming the holder and since when,
a lease taken from a dead holder of this host or an expired one elsewhere, let go at the end,
and found lost by a driver another one displaced. Real processes racing for one lease here; two
real `farm sweep --resume` racing, and a holder killed mid-trial, in tests/e2e/test_sweep_lease.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.entities import RunTag
from mlflow.tracking import MlflowClient

from farm.errors import UserError
from farm.store import lease
from farm.store import schema as S
from farm.store import tracking
from farm.study.grid import expand
from farm.study.load import load_study
from sweeptools import write_study

HOST = socket.gethostname()
SPACE = tracking.pid_namespace()
REPO = Path(__file__).resolve().parents[3]


def _holder(token="t1", host=HOST, pid=1234, space=SPACE, since=1000.0) -> str:
    return lease.Holder(token, host, pid, space, since).value()


@pytest.mark.parametrize("tags, alive, free", [
    ({}, True, True),  # a sweep stored before leases
    ({S.LEASE_TAG: S.LEASE_RELEASED}, True, True),
    ({S.LEASE_TAG: "not json"}, True, True),
    ({S.LEASE_TAG: _holder(since=1000), S.HEARTBEAT_TAG: "1100"}, True, False),  # fresh, alive
    ({S.LEASE_TAG: _holder(since=1100)}, True, False),  # just claimed: the claim counts as a beat
    ({S.LEASE_TAG: _holder(since=1000), S.HEARTBEAT_TAG: "1100"}, False, True),  # a dead process here
    ({S.LEASE_TAG: _holder(host="elsewhere", since=1000), S.HEARTBEAT_TAG: "1100"}, False, False),  # not askable
    ({S.LEASE_TAG: _holder(space="pid:[1]", since=1000), S.HEARTBEAT_TAG: "1100"}, False, False),  # another PID space
    ({S.LEASE_TAG: _holder(host="elsewhere", since=0), S.HEARTBEAT_TAG: f"{1200 - S.DRIVER_GONE_S - 1:.0f}"},
     True, True),  # expired
])
def test_the_lease_rule(tags, alive, free):
    held = lease.holder(tags, 1200.0, HOST, SPACE, lambda pid: alive)
    assert (held is None) == free


def test_a_claim_of_this_process_is_its_own():
    tags = {S.LEASE_TAG: _holder(token="mine", since=1000), S.HEARTBEAT_TAG: "1100"}
    assert lease.holder(tags, 1200.0, HOST, SPACE, lambda pid: True, frozenset({"mine"})) is None


@pytest.fixture
def stored(tmp_path):
    study = load_study(str(write_study(tmp_path / "s.yaml", name="leased", grid="g",
                                       blocks=[{"engine": "mock", "models": ["tiny"], "name": "a"}])))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _, sweep_id = tracking.start_sweep(uri, "leased", study, "g", expand(study, "g"), command="farm sweep", repeats=1)
    yield uri, sweep_id
    lease.release(uri, sweep_id)


def _lease_of(uri, sweep_id, *, host=HOST, pid, space=SPACE, since, beat_age_s):
    MlflowClient(uri).log_batch(sweep_id, tags=[
        RunTag(S.LEASE_TAG, _holder(token="theirs", host=host, pid=pid, space=space, since=since)),
        RunTag(S.HEARTBEAT_TAG, f"{time.time() - beat_age_s:.0f}")])


def _tag(uri, sweep_id):
    return json.loads(MlflowClient(uri).get_run(sweep_id).data.tags[S.LEASE_TAG])


@pytest.fixture
def live_pid():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    yield proc.pid
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_second_driver_is_refused_in_one_line_naming_the_holder_and_since_when(stored, live_pid):
    uri, sweep_id = stored
    since = time.time() - 3600
    _lease_of(uri, sweep_id, pid=live_pid, since=since, beat_age_s=10)
    with pytest.raises(UserError) as err:
        lease.take(uri, sweep_id)
    line = err.value.line()
    assert "\n" not in line and line.startswith(f"--resume: sweep {sweep_id} is run by another driver: ")
    assert f"process {live_pid} on {HOST} since {time.strftime('%Y-%m-%d %H:%M', time.gmtime(since))}" in line
    assert "--wait-lease" in line
    assert _tag(uri, sweep_id)["pid"] == live_pid  # untouched


def test_a_driver_asked_to_wait_waits_then_says_how_long(stored, live_pid):
    uri, sweep_id = stored
    _lease_of(uri, sweep_id, pid=live_pid, since=time.time(), beat_age_s=0)
    lines = []
    with pytest.raises(UserError) as err:
        lease.take(uri, sweep_id, wait_s=1, on_wait=lines.append)
    assert err.value.key == "--wait-lease" and err.value.reason.startswith("waited ")
    assert f"process {live_pid} on {HOST}" in err.value.reason
    assert len(lines) == 1 and "waiting up to 1 s" in lines[0]


def test_a_waiting_driver_takes_the_lease_once_it_is_let_go(stored, live_pid):
    uri, sweep_id = stored
    _lease_of(uri, sweep_id, pid=live_pid, since=time.time(), beat_age_s=0)
    # the holder lets it go a few seconds into the wait (its sweep ended)
    letgo = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from mlflow.tracking import MlflowClient; time.sleep(3); "
        f"MlflowClient(sys.argv[1]).set_tag(sys.argv[2], {S.LEASE_TAG!r}, {S.LEASE_RELEASED!r})"), uri, sweep_id],
        start_new_session=True)
    try:
        lease.take(uri, sweep_id, wait_s=120)
    finally:
        letgo.wait(timeout=120)
    assert _tag(uri, sweep_id)["pid"] == os.getpid() and lease.holds(sweep_id)


def test_a_dead_holder_here_and_an_expired_one_elsewhere_leave_the_lease_free(stored):
    uri, sweep_id = stored
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _lease_of(uri, sweep_id, pid=dead.pid, since=time.time(), beat_age_s=0)
    lease.take(uri, sweep_id)
    assert _tag(uri, sweep_id)["pid"] == os.getpid()
    lease.release(uri, sweep_id)
    assert MlflowClient(uri).get_run(sweep_id).data.tags[S.LEASE_TAG] == S.LEASE_RELEASED
    _lease_of(uri, sweep_id, host="gpu-node-7", pid=1, since=time.time() - 4000, beat_age_s=S.DRIVER_GONE_S + 60)
    lease.take(uri, sweep_id)
    tags = MlflowClient(uri).get_run(sweep_id).data.tags
    assert _tag(uri, sweep_id)["host"] == HOST and tags[S.DRIVER_TAG] == f"{HOST}:{os.getpid()}"


def test_the_driver_holding_a_sweep_resumes_it_again_and_keeps_its_lease(stored):
    """A program that ran a sweep and resumes it in the same process (its heartbeat beating on until
    the report is made) is that sweep's one driver already: not refused, and its lease stays held;
    a lease another driver took from it since is not its own any more."""
    uri, sweep_id = stored
    assert lease.take(uri, sweep_id) is True
    token = _tag(uri, sweep_id)["token"]
    assert lease.take(uri, sweep_id) is False  # held already: nothing taken, nothing refused
    assert _tag(uri, sweep_id)["token"] == token and lease.holds(sweep_id)
    _lease_of(uri, sweep_id, host="gpu-node-7", pid=99, since=time.time(), beat_age_s=0)
    with pytest.raises(UserError, match="run by another driver: process 99 on gpu-node-7"):
        lease.take(uri, sweep_id)


def test_a_displaced_driver_finds_its_lease_lost_and_writes_no_end(stored):
    uri, sweep_id = stored
    lease.take(uri, sweep_id)
    lost = []
    beat = tracking.Heartbeat(uri, sweep_id, on_lost=lambda: lost.append(True), lease=lease)
    try:
        _lease_of(uri, sweep_id, host="gpu-node-7", pid=99, since=time.time(), beat_age_s=0)
        beat.beat()
        assert lost == [True] and "lost sweep" in beat.lost and "process 99 on gpu-node-7" in beat.lost
        with pytest.raises(UserError, match="lost sweep"):
            tracking.finish_sweep(uri, sweep_id, "killed")
        run = MlflowClient(uri).get_run(sweep_id)
        assert run.info.status == "RUNNING" and run.data.tags[S.STATUS_TAG] == S.SWEEP_RUNNING
        assert _tag(uri, sweep_id)["host"] == "gpu-node-7"  # the new holder's, not let go
    finally:
        beat.stop()


def test_a_displaced_driver_starts_no_trial_before_its_next_beat(stored):
    """The check run before each trial start (farm/run/driver.py: run_trials): nothing while the
    lease is this driver's; once another driver took it, the check stops this one at once (an
    interrupt, as a beat that found it out would), its beats end, and its end is not written."""
    uri, sweep_id = stored
    lease.take(uri, sweep_id)
    beat = tracking.Heartbeat(uri, sweep_id, on_lost=lambda: None, lease=lease)
    try:
        tracking.check_lease(sweep_id)  # held: the trial may start
        tracking.check_lease("another-sweep")  # no driver of it here: nothing to check
        _lease_of(uri, sweep_id, host="gpu-node-7", pid=99, since=time.time(), beat_age_s=0)
        with pytest.raises(KeyboardInterrupt, match="process 99 on gpu-node-7"):
            tracking.check_lease(sweep_id)
        assert beat._stop.is_set()  # no beat renews the new holder's lease as this driver's
        with pytest.raises(tracking.LeaseLost):  # again: still lost, without another read
            tracking.check_lease(sweep_id)
        with pytest.raises(UserError, match="lost sweep"):
            tracking.finish_sweep(uri, sweep_id, "killed")
        assert _tag(uri, sweep_id)["host"] == "gpu-node-7"
    finally:
        beat.stop()


def test_a_new_sweep_is_created_with_its_drivers_lease(tmp_path):
    """The driver's claim goes into the sweep run's creation: from the first moment the run exists,
    another driver resuming its id (before the first heartbeat) finds it held by this process."""
    study = load_study(str(write_study(tmp_path / "s.yaml", name="leased", grid="g",
                                       blocks=[{"engine": "mock", "models": ["tiny"], "name": "a"}])))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    token, claim = lease.new_claim()
    _, sweep_id = tracking.start_sweep(uri, "leased", study, "g", expand(study, "g"), command="farm sweep",
                                       repeats=1, claim=claim)
    lease.hold(uri, sweep_id, token)
    try:
        tags = MlflowClient(uri).get_run(sweep_id).data.tags
        assert _tag(uri, sweep_id) | {"since": 0} == {"token": token, "host": HOST, "pid": os.getpid(),
                                                      "pid_namespace": SPACE, "since": 0}
        held = lease.holder(tags, time.time(), HOST, SPACE, alive=lambda pid: True)  # as another driver here sees it
        assert held is not None and held[0].pid == os.getpid()
        assert lease.holds(sweep_id) and lease.verify(uri, sweep_id) is None
        beat = tracking.Heartbeat(uri, sweep_id, lease=lease)  # holds it already: claims nothing new
        try:
            assert _tag(uri, sweep_id)["token"] == token
        finally:
            beat.stop()
    finally:
        lease.release(uri, sweep_id)


def test_a_finished_sweep_lets_its_lease_go(stored):
    uri, sweep_id = stored
    beat = tracking.Heartbeat(uri, sweep_id, lease=lease)  # a new sweep's driver: claimed with its first beat
    assert _tag(uri, sweep_id)["pid"] == os.getpid()
    tracking.finish_sweep(uri, sweep_id, "finished")
    assert MlflowClient(uri).get_run(sweep_id).data.tags[S.LEASE_TAG] == S.LEASE_RELEASED
    assert not lease.holds(sweep_id) and not beat.lost


CONTENDER = """
import os, sys, time
from farm.errors import UserError
from farm.store import lease
uri, sweep_id, go = sys.argv[1], sys.argv[2], float(sys.argv[3])
from farm.store import tracking
tracking.get_sweep(uri, sweep_id)  # the store opened before the start line
time.sleep(max(0.0, go - time.time()))
try:
    lease.take(uri, sweep_id)
except UserError as exc:
    print("refused", exc.line())
else:
    print("took", os.getpid(), flush=True)
    time.sleep(15)  # holding it while the others read it back (let go on the way out)
"""


def test_contenders_started_at_once_leave_exactly_one_holder(stored, tmp_path):
    """Four processes read the lease free at the same second and claim it: one holds it, the
    others are refused naming it (Fischer's rule, farm/store/lease.py)."""
    uri, sweep_id = stored
    lease.release(uri, sweep_id)  # the writer's own claim of a new sweep goes: free
    MlflowClient(uri).set_tag(sweep_id, S.LEASE_TAG, S.LEASE_RELEASED)
    go = time.time() + 12
    procs = [subprocess.Popen([sys.executable, "-c", CONTENDER, uri, sweep_id, str(go)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
             for _ in range(4)]
    try:
        outs = [p.communicate(timeout=180)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    took = [o for o in outs if o.startswith("took ")]
    refused = [o for o in outs if o.startswith("refused ")]
    assert len(took) == 1 and len(refused) == 3, outs
    winner = int(took[0].split()[1])
    assert winner in {p.pid for p in procs}
    for out in refused:
        assert f"is run by another driver: process {winner} on {HOST} since " in out
