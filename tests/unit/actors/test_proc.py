"""Engine process supervision with real processes: crash vs timeout, stop by group, watchdog."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actors.proc import EngineExited, EngineProcess, ReadyTimeout, clean_env, free_port
from actors.watchdog import group_alive, group_exists
from sweeptools import HANG_S, wait_until


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _wait_dead(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


# A server that forks a child (like vLLM's engine core) and ignores nothing.
SERVER = r"""
import http.server, os, sys, time
port = int(sys.argv[1])
child = os.fork()
if child == 0:
    open(sys.argv[2], "w").write(str(os.getpid()))
    time.sleep(3600)
    os._exit(0)
print("serving", flush=True)
http.server.HTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler).serve_forever()
"""


def test_crash_is_told_apart_from_timeout(tmp_path):
    crash = EngineProcess([sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"], dict(os.environ),
                          tmp_path / "crash.log")
    crash.start()
    with pytest.raises(EngineExited) as info:
        crash.wait_ready("http://127.0.0.1:9/health", timeout_s=30)
    assert info.value.returncode == 3
    assert "boom" in (tmp_path / "crash.log").read_text()
    crash.stop()

    hang = EngineProcess([sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ), tmp_path / "hang.log")
    hang.start()
    with pytest.raises(ReadyTimeout):
        hang.wait_ready(f"http://127.0.0.1:{free_port()}/health", timeout_s=1.5)
    hang.stop()
    assert not _alive(hang.pid)


def test_ready_then_stop_kills_the_whole_group(tmp_path):
    port = free_port()
    child_file = tmp_path / "child.pid"
    eng = EngineProcess([sys.executable, "-c", SERVER, str(port), str(child_file)], dict(os.environ),
                        tmp_path / "engine.log", grace_s=2)
    eng.start()
    eng.wait_ready(f"http://127.0.0.1:{port}/", timeout_s=30)
    child = int(child_file.read_text())
    assert _alive(child)
    eng.stop()
    assert not _alive(eng.pid)
    assert _wait_dead(child, HANG_S)


def test_watchdog_kills_engine_when_owner_dies(tmp_path):
    """The owner is killed with SIGKILL (no cleanup runs): its engine must be gone (the watchdog ends it)."""
    pid_file = tmp_path / "engine.pid"
    owner_code = f"""
import os, sys, time
sys.path[:0] = {sys.path!r}
from pathlib import Path
from actors.proc import EngineProcess
eng = EngineProcess([sys.executable, '-c', 'import time; time.sleep(3600)'], dict(os.environ), Path({str(tmp_path / 'e.log')!r}))
eng.start()
Path({str(pid_file)!r}).write_text(str(eng.pid))
time.sleep(3600)
"""
    owner = subprocess.Popen([sys.executable, "-c", owner_code])
    wait_until(lambda: pid_file.exists() and pid_file.read_text(), HANG_S, 0.1, "the engine's pid")
    engine_pid = int(pid_file.read_text())
    assert _alive(engine_pid)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert _wait_dead(engine_pid, HANG_S), "engine outlived its owner"


ECHO_SECRET = ("import os, sys, time\n"
               "print('starting with token', os.environ['HF_TOKEN'], flush=True)\n"
               "sys.stderr.write('warning: token=' + os.environ['HF_TOKEN'] + ' in the argv\\n'); sys.stderr.flush()\n"
               "time.sleep(3600)\n")


def test_an_engine_given_secrets_never_writes_them_to_disk_even_if_its_owner_is_killed(tmp_path):
    """The owner is SIGKILLed (it never gets to clean the log): the log on disk has the lines,
    masked, and the engine is gone."""
    secret = "hf_" + "Zq8" * 10
    log, pid_file = tmp_path / "engine.log", tmp_path / "engine.pid"
    owner_code = f"""
import os, sys, time
sys.path[:0] = {sys.path!r}
from pathlib import Path
from actors.proc import EngineProcess
eng = EngineProcess([sys.executable, '-c', {ECHO_SECRET!r}], {{**os.environ, 'HF_TOKEN': {secret!r}}},
                    Path({str(log)!r}), secrets=[{secret!r}])
eng.start()
Path({str(pid_file)!r}).write_text(str(eng.pid))
time.sleep(3600)
"""
    owner = subprocess.Popen([sys.executable, "-c", owner_code])
    wait_until(lambda: log.exists() and "in the argv" in log.read_text() and pid_file.exists() and pid_file.read_text(),
               HANG_S, 0.1, "the engine's log lines")
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    text = log.read_text()
    assert "starting with token ***" in text and "warning: token=*** in the argv" in text, text
    assert secret not in text
    assert _wait_dead(int(pid_file.read_text()), HANG_S), "engine outlived its owner"


def test_an_engine_given_secrets_logs_everything_up_to_its_end(tmp_path):
    """Through the masking pipe, the log still holds all the output once stop() returns."""
    eng = EngineProcess([sys.executable, "-c", "import sys\nfor i in range(2000): print('line', i, 'sk-abcdef123')\n"
                                               "sys.exit(4)"], dict(os.environ), tmp_path / "e.log",
                        secrets=["sk-abcdef123"])
    eng.start()
    eng.proc.wait(timeout=30)
    assert eng.stop() == 4
    lines = (tmp_path / "e.log").read_text().splitlines()
    assert len(lines) == 2000 and lines[-1] == "line 1999 ***"


def test_a_group_whose_processes_all_exited_is_gone_before_they_are_reaped(tmp_path):
    # An engine's helper re-parented to init stays a zombie until init reaps it (seconds on some
    # machines, never where PID 1 reaps nothing): stopping the engine does not wait for that.
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    exited = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    try:
        wait_until(lambda: _state(exited.pid) == "Z", HANG_S, what="the child to exit")
        assert group_exists(exited.pid) and not group_alive(exited.pid)  # only its zombie is left
        assert group_alive(running.pid)
    finally:
        running.kill()
        running.wait()
        exited.wait()
    assert not group_exists(exited.pid) and not group_alive(exited.pid)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_engine_environment_has_no_ray_variables():
    env = clean_env({"RAY_ADDRESS": "x:6379", "RAY_JOB_ID": "1", "PATH": "/bin"}, {"VLLM_SERVER_DEV_MODE": "1"})
    assert env == {"PATH": "/bin", "VLLM_SERVER_DEV_MODE": "1"}
