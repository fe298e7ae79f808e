"""Resume after Ctrl-C and after a killed driver, with `farm sweep` as a real process (real Ray,
MLflow, guidellm and mock-server engines).

One sweep of two trials, one at a time, lives through three drivers:
1. trial `a` finishes; during `b`'s benchmark the driver gets SIGINT (Ctrl-C): it stops the
   engine, marks the sweep KILLED, prints the resume command and exits 130; `b` is not stored;
2. the printed command resumes it: only `b` starts; once `b`'s engine runs, the driver gets
   SIGKILL (no cleanup at all): `b`'s engine must still go (its actor dies with the driver's
   Ray, the engine's watchdog sees that);
3. the same command again: only `b` runs, the sweep finishes, and MLflow holds each trial once.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from sweeptools import (HANG_S, alive, child_runs, engine_of, port_free, profile_started, seconds_until_dead, start_farm,
                        trial_dir, wait_until, write_study)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from farm.study.grid import expand
    from farm.study.load import load_study

    tmp = tmp_path_factory.mktemp("resume")
    path = write_study(
        tmp / "resume.yaml", name="resume", grid="two", max_concurrent=1,
        blocks=[{"engine": "mock", "models": ["tiny"], "name": "a", "flags": {"ttft-ms": 5, "itl-ms": 300}},
                {"engine": "mock", "models": ["tiny"], "name": "b", "flags": {"ttft-ms": 6, "itl-ms": 300}}],
        profile={"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8}, "rate": 1000,
                 "requests": 4, "max_concurrency": 4, "max_seconds": 60},
    )
    ids = {t.name: t.id for t in expand(load_study(path), "two")}
    return dict(tmp=tmp, path=path, ids=ids, uri=f"sqlite:///{tmp / 'mlflow.db'}", workdir=tmp / "farm-runs")


def _trial_ids(runs) -> list[str]:
    return sorted(r.data.tags["farm.trial_id"] for r in runs)


def test_ctrl_c_then_sigkill_then_resume_runs_each_trial_once(study):
    tmp, ids, uri, workdir = study["tmp"], study["ids"], study["uri"], study["workdir"]
    args = ["sweep", "--config", str(study["path"]), "--grid", "two", "--tracking-uri", uri,
            "--workdir", str(workdir)]

    # 1. Ctrl-C while `b` runs.
    log1 = tmp / "first.out"
    first = start_farm(*args, cwd=tmp, log=log1)
    try:
        wait_until(lambda: first.poll() is not None or ("[1/2] ok" in log1.read_text()
                                                        and profile_started(workdir, ids["b"])),
                   400, what="trial a to finish and trial b's benchmark to start")
        assert first.poll() is None, log1.read_text()[-3000:]
        b_pid, b_port = engine_of(workdir, ids["b"])
        sent = time.monotonic()
        first.send_signal(signal.SIGINT)
        first.wait(timeout=120)
        stop_s = time.monotonic() - sent
    finally:
        if first.poll() is None:
            first.kill()
    out1 = log1.read_text()
    assert first.returncode == 130, out1[-3000:]
    assert "Traceback" not in out1
    lines = out1.splitlines()
    at = lines.index("interrupted: engines stopped, sweep marked killed. Resume with:")
    resume_cmd = lines[at + 1].strip()
    sweep_id = resume_cmd.split("--resume ")[1]
    assert resume_cmd.startswith("farm sweep --config") and resume_cmd.endswith(f"--resume {sweep_id}")
    assert not alive(b_pid) and port_free(b_port), "the interrupted trial's engine outlived Ctrl-C"
    client = MlflowClient(uri)
    parent = client.get_run(sweep_id)
    assert parent.info.status == "KILLED" and parent.data.tags["farm.status"] == "killed"
    assert _trial_ids(child_runs(uri, sweep_id)) == [ids["a"]]  # b was cancelled: not stored
    print(f"Ctrl-C to exit: {stop_s:.1f} s")

    # 2. The printed command resumes: only b starts. Then the driver is killed outright.
    argv = shlex.split(resume_cmd)[1:]
    log2 = tmp / "second.out"
    second = start_farm(*argv, cwd=tmp, log=log2)
    try:
        wait_until(lambda: second.poll() is not None or trial_dir(workdir, ids["b"]).name == "attempt-1.2"
                   and engine_of(workdir, ids["b"]), 400, what="trial b's engine to start again")
        assert second.poll() is None, log2.read_text()[-3000:]
        b2_pid, b2_port = engine_of(workdir, ids["b"])
        second.send_signal(signal.SIGKILL)
        second.wait(timeout=30)
        gone_s = seconds_until_dead([b2_pid])  # the killed driver's engine ends (a hang fails the wait)
    finally:
        if second.poll() is None:
            second.kill()
    out2 = log2.read_text()
    assert "start   b " in out2 and "start   a " not in out2
    wait_until(lambda: port_free(b2_port), HANG_S, what="the engine's port to be free")
    print(f"engine gone {gone_s:.1f} s after the driver's SIGKILL")

    # 3. Resume again: only b runs; each trial id is once among the sweep's child runs.
    proc = subprocess.run([sys.executable, "-m", "farm.cli", *argv], cwd=tmp, capture_output=True, text=True,
                          timeout=600, env=os.environ.copy())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "resumed: 1 trial(s) already finished were not run again" in proc.stdout
    assert proc.stdout.count("start   ") == 1 and "start   b " in proc.stdout
    runs = child_runs(uri, sweep_id)
    assert _trial_ids(runs) == sorted(ids.values())
    assert {r.data.tags["farm.status"] for r in runs} == {"ok"}
    assert client.get_run(sweep_id).info.status == "FINISHED"
    assert "recommended: trial" in proc.stdout
