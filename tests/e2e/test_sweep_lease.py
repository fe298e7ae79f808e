"""One sweep, one driver (issue 51 item 1), with `farm sweep` as real processes (real Ray, MLflow,
guidellm and mock-server engines) on one real SQLite store.

One sweep of three trials, one at a time, lives through five drivers:
1. the first driver is killed outright (SIGKILL) in its second trial's benchmark: it lets nothing
   go, its lease stays on the sweep's run, which stays "running"; the next `farm status` sees its
   driver is a dead process of this host, marks the run interrupted (MLflow status KILLED) and
   prints the command that resumes it (issue 51 item 6);
2. two `farm sweep --resume` started together race for the lease: the dead holder is found dead
   (this host, its pid gone), one takes the lease and resumes, the other is refused in one line
   naming the holder and since when, exit 2, having started nothing;
3. while the holder runs, a third asked to wait one second is refused once it has waited, and a
   fourth asked to wait long enough waits, then takes the lease the holder let go and finds
   nothing left to run;
4. the store holds each trial once, every one finished: none lost, none twice.
The lease's rule and its race of four processes at the same second: tests/unit/store/test_sweep_lease.py.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_farm
from sweeptools import HANG_S, child_runs, profile_started, slow_mock_sweep, wait_until

pytestmark = pytest.mark.slow


def _start(args: list[str], cwd: Path, log: Path) -> subprocess.Popen:
    """`farm ...` in a process group of its own (stopped by group at the end), output to `log`."""
    out = open(log, "w")
    return subprocess.Popen([sys.executable, "-m", "farm.cli", *args], cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the driver's group: what a killed driver left, if anything
        except ProcessLookupError:
            pass
        proc.wait()


def _sweep_id(uri: str) -> str:
    client = MlflowClient(uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()],
                                filter_string="tags.`farm.kind` = 'sweep'")
    return run.info.run_id


@pytest.fixture
def sweep(tmp_path):
    return slow_mock_sweep(tmp_path, name="leased", trials="abc", itl_ms=300)


def test_two_drivers_race_for_a_sweep_one_runs_it_and_nothing_is_lost_or_run_twice(sweep):
    tmp, uri, args, ids = sweep
    procs: list[subprocess.Popen] = []
    try:
        # 1. the first driver, killed outright in its second trial's benchmark
        log0 = tmp / "first.out"
        first = _start(args, tmp, log0)
        procs.append(first)
        wait_until(lambda: first.poll() is not None or ("[1/3] ok" in log0.read_text()
                                                        and profile_started(tmp / "w", ids[1])),
                   400, what="the first trial to finish and the second's benchmark to start")
        assert first.poll() is None, log0.read_text()[-3000:]
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
        assert first.returncode == -signal.SIGKILL, log0.read_text()[-3000:]
        sweep_id = _sweep_id(uri)
        client = MlflowClient(uri)
        assert f'"pid":{first.pid}' in client.get_run(sweep_id).data.tags["farm.lease"]  # not let go
        assert client.get_run(sweep_id).info.status == "RUNNING"  # nothing ran to say otherwise
        # the next command that reads the sweep marks it interrupted and says how to resume it
        status = run_farm("status", sweep_id, "--tracking-uri", uri, cwd=tmp)
        assert status.returncode == 0, status.stderr
        lines = status.stdout.splitlines()
        assert lines[0] == f"sweep {sweep_id} ({client.get_run(sweep_id).info.run_name}): interrupted", lines
        assert lines[2].startswith("interrupted: its driver (process ") and " is gone; last heartbeat " in lines[2]
        assert lines[3].startswith("resume with: farm sweep --config ") and lines[3].endswith(f"--resume {sweep_id}")
        run = client.get_run(sweep_id)
        assert run.info.status == "KILLED" and run.data.tags["farm.status"] == "interrupted"

        # 2. two resumes at once
        resume = [*args, "--resume", sweep_id]
        racers = [_start(resume, tmp, tmp / f"racer{i}.out") for i in range(2)]
        procs += racers
        wait_until(lambda: any(r.poll() is not None for r in racers), HANG_S, what="one racer to be refused")
        (loser,) = [r for r in racers if r.poll() is not None]
        (holder,) = [r for r in racers if r is not loser]
        out = (tmp / f"racer{racers.index(loser)}.out").read_text()
        assert loser.returncode == 2, out[-3000:]
        refusal = [line for line in out.splitlines() if line.startswith("error: ")]
        assert len(refusal) == 1, out
        assert re.fullmatch(rf"error: --resume: sweep {sweep_id} is run by another driver: process {holder.pid} on "
                            rf"{re.escape(socket.gethostname())} since \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC "
                            rf"\(last heartbeat \d+ s ago\); .*--wait-lease SECONDS.*", refusal[0]), refusal[0]
        assert "Ray" not in out and "Traceback" not in out  # refused before anything started
        assert holder.poll() is None

        # 3. while the holder runs: a bounded wait that ends refused, and one that outlasts it
        hlog = tmp / f"racer{racers.index(holder)}.out"
        wait_until(lambda: holder.poll() is not None or f"sweep {sweep_id}" in hlog.read_text(),
                   HANG_S, what="the holder to begin the sweep")
        short = subprocess.run([sys.executable, "-m", "farm.cli", *resume, "--wait-lease", "1"], cwd=tmp,
                               capture_output=True, text=True, timeout=HANG_S, start_new_session=True)
        if holder.poll() is None:  # (the holder may have finished meanwhile on a fast machine)
            assert short.returncode == 2, short.stdout + short.stderr
            assert re.search(rf"--wait-lease: waited \d+ s; sweep {sweep_id} is still run by another driver: "
                             rf"process {holder.pid} on ", short.stderr), short.stderr
        log3 = tmp / "patient.out"
        patient = _start([*resume, "--wait-lease", "600"], tmp, log3)
        procs.append(patient)
        holder.wait(timeout=600)
        assert holder.returncode == 0, hlog.read_text()[-3000:]
        patient.wait(timeout=600)
        out3 = log3.read_text()
        assert patient.returncode == 0, out3[-3000:]
        waited = "is run by another driver" in out3
        if waited:  # it came while the holder ran: said so, then resumed what was left, which was nothing
            assert f"process {holder.pid} on " in out3 and "waiting up to 600 s for it to end" in out3
        assert "resumed: 3 trial(s) already finished were not run again" in out3, out3[-3000:]

        # 4. each trial once, every one finished
        runs = child_runs(uri, sweep_id)
        trials = sorted(r.data.tags["farm.trial_id"] for r in runs)
        assert trials == sorted(ids), trials
        assert {r.data.tags["farm.status"] for r in runs} == {"ok"}
        assert MlflowClient(uri).get_run(sweep_id).data.tags["farm.lease"] == "released"
    finally:
        _stop(procs)
