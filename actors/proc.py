"""Engine server processes: own process group, output to a log file, stopped by group.

Waiting for readiness polls the process on every loop, so "the engine exited" and "the engine
never became ready" are different errors. A watchdog child kills the group if the owner dies.
An engine given secrets writes through a pipe that masks them line by line, so that no secret
reaches the node's disk, even if the owner is killed before it could clean up.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import httpx

from farm.secrets import scrub
from actors.watchdog import group_alive


class EngineExited(RuntimeError):
    """The engine process ended before or while it was needed."""

    def __init__(self, returncode: int | None):
        self.returncode = returncode
        super().__init__(f"engine exited with code {returncode}")


class ReadyTimeout(RuntimeError):
    """The engine kept running but never answered its readiness path in time."""


class FatalInLog(ReadyTimeout):
    """The engine's log names a fatal error and the engine neither exited nor became ready soon
    after: waiting the rest of its readiness timeout (up to 30 minutes of a GPU) would buy nothing."""


# How long an engine whose log shows a fatal error gets to exit (its full log) or to recover.
FATAL_GRACE_S = 15.0
# What of the log the fatal check reads (the start's end; a start log runs to a few hundred KB).
FATAL_SCAN_BYTES = 512 * 1024
FATAL_SCAN_EVERY_S = 2.0
# How often readiness is asked for: the recorded start time is as exact as this, and a start is
# over this much later on average. Asking a port nobody listens on yet costs microseconds.
READY_POLL_S = 0.1


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on this node now; a race with another process shows up as port_in_use."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def clean_env(base: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """The node's environment without RAY_* (an engine must never attach to farm's Ray cluster)."""
    env = {k: v for k, v in base.items() if not k.startswith("RAY_")}
    env.update(extra)
    return env


def expand_env(values: dict[str, str], environ: dict[str, str]) -> dict[str, str]:
    """`${NAME}` in a study's engine environment is the node's own variable (a bundle's path differs
    from node to node); a variable the node does not have is an error, not an empty string."""
    out = {}
    for key, value in values.items():
        missing = [m.group(1) for m in re.finditer(r"\$\{(\w+)\}", value) if m.group(1) not in environ]
        if missing:
            raise EngineEnvError(f"{key}={value}: ${{{missing[0]}}} is not set on this node")
        out[key] = re.sub(r"\$\{(\w+)\}", lambda m: environ[m.group(1)], value)
    return out


class EngineEnvError(ValueError):
    """The study's engine environment names a variable the node does not have."""


def tail(path: Path, max_lines: int = 80, max_bytes: int = 64_000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-max_lines:])


def watch_group(pgid: int, grace_s: float) -> subprocess.Popen:
    """A watchdog child (actors/watchdog.py) that stops process group `pgid` once this process dies."""
    return subprocess.Popen(
        [sys.executable, "-m", "actors.watchdog", str(pgid), str(os.getpid()), str(grace_s)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )


class EngineProcess:
    """One engine server: started in its own session, logged to a file, stopped by group."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path, *, grace_s: float = 15.0,
                 secrets: list[str] | tuple[str, ...] = ()):
        self.argv = argv
        self.env = env
        self.log_path = Path(log_path)
        self.grace_s = grace_s
        self.secrets = [s for s in secrets if s]
        self.proc: subprocess.Popen | None = None
        self.watchdog: subprocess.Popen | None = None
        self._copier: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # With secrets the output goes through a pipe this process masks; otherwise straight to the file.
        log = None if self.secrets else open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                self.argv, stdout=log or subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self.env, start_new_session=True,
            )
        finally:
            if log is not None:
                log.close()
        if self.secrets:
            self._copier = threading.Thread(target=self._copy_masked, args=(self.proc.stdout,),
                                            name=f"engine-log-{self.proc.pid}", daemon=True)
            self._copier.start()
        self.watchdog = watch_group(self.proc.pid, self.grace_s)

    def _copy_masked(self, pipe) -> None:
        """Engine output to the log file, each line with the secrets masked, flushed as it comes
        (readiness and failure classification read the file while the engine runs)."""
        with open(self.log_path, "ab") as log, pipe:
            for line in iter(pipe.readline, b""):
                log.write(scrub(line.decode("utf-8", errors="replace"), self.secrets).encode())
                log.flush()

    def poll(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, url: str, timeout_s: float, interval_s: float = READY_POLL_S, *,
                   fatal: Callable[[str], object | None] | None = None, fatal_grace_s: float = FATAL_GRACE_S) -> float:
        """Seconds until `url` answered 200; raises EngineExited, ReadyTimeout, or FatalInLog when
        `fatal(log_text)` names a failure and the engine neither exits nor gets ready within
        `fatal_grace_s` of it."""
        started = time.monotonic()
        deadline = started + timeout_s
        next_scan, fatal_seen, quiet_since, log_size = started, False, started, -1
        with httpx.Client(timeout=5.0) as client:
            while True:
                code = self.poll()
                if code is not None:
                    raise EngineExited(code)
                try:
                    if client.get(url).status_code == 200:
                        return time.monotonic() - started
                except httpx.HTTPError:
                    pass
                now = time.monotonic()
                if now > deadline:
                    raise ReadyTimeout(f"not ready at {url} after {timeout_s:.0f} s")
                if fatal is not None and now >= next_scan:
                    next_scan = now + FATAL_SCAN_EVERY_S
                    size = self._log_size()
                    if size != log_size:
                        log_size, quiet_since = size, now
                    if not fatal_seen and fatal(self._log_end()) is not None:
                        fatal_seen = True
                    # An engine that logged a fatal error and went quiet is hung; one that goes on
                    # writing may be recovering (a retried allocation), and is waited for.
                    if fatal_seen and now - quiet_since > fatal_grace_s:
                        raise FatalInLog(f"its log shows a fatal error and it has written nothing for {fatal_grace_s:.0f} s "
                                         f"since (stopped waiting after {now - started:.0f} s of its {timeout_s:.0f} s "
                                         f"readiness timeout)")
                time.sleep(interval_s)

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return -1

    def _log_end(self) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - FATAL_SCAN_BYTES))
                return fh.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def stop(self) -> int | None:
        """SIGTERM to the group, a grace period, then SIGKILL. Returns the exit code."""
        if self.proc is None:
            return None
        pgid = self.proc.pid  # start_new_session: the group id is the leader's pid
        for sig, wait_s in ((signal.SIGTERM, self.grace_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                if self.proc.poll() is not None and not group_alive(pgid):
                    break
                time.sleep(0.1)
            else:
                continue
            break
        code = self.proc.wait(timeout=5)
        if self._copier is not None:
            self._copier.join(timeout=5)  # the rest of the output, up to the group's end
        if self.watchdog is not None:
            self.watchdog.kill()
            self.watchdog.wait(timeout=5)
        return code

