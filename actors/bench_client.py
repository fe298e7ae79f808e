"""The guidellm client of a trial's benchmark runs: each run's scenario spec (pure) and the client process
that runs them, one after another (`ClientSession`)."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from actors.proc import watch_group
from farm.study.spec import ProfileSpec

# guidellm starts 10 worker processes by default; 2 keep a 2-core node responsive and are
# plenty for the request rates one engine serves. A study or the environment may say otherwise.
DEFAULT_WORKERS = "2"

# guidellm's data loader keeps 4,096 requests made ahead of demand (its default prefetch_factor),
# made in a worker process beside the benchmark whatever the run's size: a run of 48 requests made
# ~4,100 prompts, 2.4 s of CPU (faker text, then the tokenizer) that competed with the engine and
# guidellm's own workers for a 2-core machine during the measurement. A run draws at most its
# request count, so a buffer of that many keeps the loader as far ahead as the whole run; the
# prompts are the same (one seeded sequence; the buffer only says how far ahead it is made).
GUIDELLM_PREFETCH = 4096


def scenario_spec(profile: ProfileSpec, *, target: str, model: str, tokenizer: str,
                  output: Path, data_file: Path | None = None, requests: int | None = None) -> dict:
    """guidellm 0.8 `BenchmarkArgs` for one run of `profile` against `target` (`requests`
    replaces the profile's count, for a warm-up run)."""
    backend: dict = {"kind": "openai_http", "target": target, "model": model}
    if profile.request_format:
        backend["request_format"] = profile.request_format
    strategy: dict = {"kind": "constant" if profile.rate else "concurrent"}
    if profile.rate:
        strategy["rate"] = [profile.rate]
        if profile.max_concurrency:
            strategy["max_concurrency"] = profile.max_concurrency
    else:
        strategy["streams"] = [profile.max_concurrency or 1]
    count = requests or profile.requests
    constraints: list[dict] = [{"kind": "max_requests", "count": count}]
    if profile.max_seconds:
        constraints.append({"kind": "max_duration", "seconds": profile.max_seconds})
    if profile.data.kind == "synthetic":
        data = {"kind": "synthetic_text", "prompt_tokens": profile.data.prompt_tokens,
                "output_tokens": profile.data.output_tokens, **profile.data.spread}
    else:
        if data_file is None:
            raise ValueError("a ShareGPT profile needs its prepared data file")
        data = {"kind": "json_file", "path": str(data_file)}
    spec = {
        "backend": backend,
        "profile": strategy,
        "constraints": constraints,
        "tokenizer": {"kind": "huggingface_auto", "model": tokenizer},
        "data": [data],
        "data_loader": {"kind": "pytorch", "prefetch_factor": max(1, min(GUIDELLM_PREFETCH, count))},
        "seed": {"kind": "static", "value": profile.seed},
        "outputs": [{"kind": "json", "path": str(output)}],
    }
    slo = profile.slo
    if slo is not None and slo.goodput:
        # guidellm's per-request objectives: a request conforms when its TTFT and its inter-token
        # latency are within the limits (farm's SLOs are on the P95 TTFT and the mean TPOT).
        objectives = {k: v for k, v in (("ttft_ms", slo.ttft_p95_ms_max), ("tpot_ms", slo.tpot_mean_ms_max)) if v}
        spec["metrics"] = {"kind": "generative", "slo": objectives}
    return spec


@dataclass
class ClientOutcome:
    returncode: int | None
    timed_out: bool
    seconds: float
    log_path: Path
    report_path: Path
    client_pid: int | None = None  # the client process (its group) that ran it
    forked: bool = False  # whether the node's client host forked that client


def client_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.setdefault("GUIDELLM__MAX_WORKER_PROCESSES", DEFAULT_WORKERS)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def _wait(client, done, *, started: float, timeout_s: float, engine_alive, cancelled, replies=None) -> bool:
    """Poll until `done()`, the client process exits, the time limit passes (-> True: timed out),
    the trial is cancelled, or the engine has been dead for 20 s. With `replies` (the client's
    reply pipe) a reply ends the wait as it comes, not at the next 0.1 s tick."""
    engine_gone_at: float | None = None
    while not done() and client.alive():
        now = time.monotonic()
        if now - started > timeout_s:
            return True
        if cancelled():
            return False
        if engine_gone_at is None and not engine_alive():
            engine_gone_at = now
        # A dead engine makes every request fail fast; give guidellm a moment to write its
        # report, then stop waiting for it.
        if engine_gone_at is not None and now - engine_gone_at > 20:
            return False
        if replies is None:
            time.sleep(0.1)
        elif select.select([replies], [], [], 0.1)[0] and not done():
            time.sleep(0.1)  # readable with no reply in it: the pipe's end, the client is exiting
    return False


class _Spawned:
    """A client process this actor started (`python -m actors.guidellm_worker --serve`): requests
    on its stdin, replies on a pipe of their own (guidellm prints to stdout)."""

    forked = False

    def __init__(self, log_path: Path) -> None:
        read_fd, write_fd = os.pipe()
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "actors.guidellm_worker", "--serve", str(write_fd)],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write_fd,),
                env=client_env(), start_new_session=True, text=True)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        self.replies = os.fdopen(read_fd, "r")
        self.pid = self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def returncode(self) -> int | None:
        return self.proc.returncode

    def send(self, line: str) -> None:
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def end(self, wait_s: float) -> None:
        """No more runs: the client exits by itself; its group is killed if it has not within `wait_s`."""
        if self.alive() and wait_s > 0:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=wait_s)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.alive():
            kill_group(self.pid, self.proc.wait)
        self.replies.close()


class _Forked:
    """A client the node's host forked (actors/client_host.py): guidellm already loaded; requests
    and replies are lines on the connection, and the host records its exit code."""

    forked = True

    def __init__(self, address: str, log_path: Path, timeout_s: float = 30.0) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout_s)
            sock.connect(address)
            sock.sendall(json.dumps({"log": str(log_path)}).encode() + b"\n")
            hello = b""
            while not hello.endswith(b"\n"):
                chunk = sock.recv(4096)
                if not chunk:
                    raise OSError("the client host closed the connection")
                hello += chunk
            self.pid = int(json.loads(hello)["pid"])
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self.exits = Path(address).parent / "exits"
        fd = os.dup(sock.fileno())
        os.set_blocking(fd, False)
        self.replies = os.fdopen(fd, "r")

    def alive(self) -> bool:
        return _running(self.pid)

    def returncode(self) -> int | None:
        # the host writes it once it reaped the client (a moment after the client is gone)
        deadline = time.monotonic() + 2.0
        while True:
            try:
                return int((self.exits / str(self.pid)).read_text())
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.05)

    def send(self, line: str) -> None:
        # with a timeout the socket's descriptor stays non-blocking, which the reply reader needs
        self.sock.sendall(line.encode())

    def end(self, wait_s: float) -> None:
        if self.alive() and wait_s > 0:
            try:
                self.sock.shutdown(socket.SHUT_WR)  # the end of its requests: it exits
            except OSError:
                pass
            deadline = time.monotonic() + wait_s
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
        if self.alive():
            kill_group(self.pid, lambda timeout: _gone_within(self.pid, timeout))
        self.replies.close()
        self.sock.close()


def _running(pid: int) -> bool:
    """Whether process `pid` runs (not exited, not a zombie waiting for its reaper)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")


def _gone_within(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _running(pid):
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(str(pid), timeout)
        time.sleep(0.05)


class ClientSession:
    """One guidellm client process for all runs of a trial, in its own process group, watched like
    the engine so that it never outlives the actor.

    With `host` (a callable: the node's client host's socket once it listens within the seconds
    given, else None) the client is forked by the node's host (actors/client_host.py), guidellm
    already loaded; without one, or when the host cannot fork one, this starts its own
    (`actors.guidellm_worker --serve`).

    A run that times out, is cancelled or outlives its engine kills the process group; the next
    run starts a new client process. Each run's output goes to its own log file."""

    # How long a run waits for the node's host to listen (its own import of guidellm, ~5 s of CPU)
    # before starting a client of its own.
    HOST_WAIT_S = 60.0

    def __init__(self, host=None) -> None:
        self._host = host
        self._client: _Spawned | _Forked | None = None
        self._watchdog: subprocess.Popen | None = None

    def __enter__(self) -> ClientSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The client process (and its process group), while one runs."""
        return self._client.pid if self._client is not None and self._client.alive() else None

    def start(self, log_path: Path) -> None:
        """Start the client now (a spawned one loads guidellm while, say, the engine starts); a
        host still loading guidellm itself is waited for by the first run, not here."""
        if self._client is None or not self._client.alive():
            self._start(log_path, host_wait_s=0.0)

    def _start(self, log_path: Path, host_wait_s: float) -> _Spawned | _Forked | None:
        if self._client is not None:
            self.close(wait_s=0)
        address = self._host(host_wait_s) if self._host is not None else None
        if address is None and self._host is not None and host_wait_s == 0:
            return None  # not listening yet: the first run waits for it
        client: _Spawned | _Forked | None = None
        if address is not None:
            try:
                client = _Forked(address, log_path)
            except (OSError, ValueError, KeyError) as exc:
                with open(log_path, "a") as log:  # the trial's client log says why it went its own way
                    log.write(f"farm: the node's client host could not fork a client ({exc}); starting one\n")
        if client is None:
            self._host = None  # one failure is enough: this trial's later clients are its own
            client = _Spawned(log_path)
        self._client = client
        self._watchdog = watch_group(client.pid, 5.0)
        return client

    def run(self, spec: dict, *, workdir: Path, name: str, timeout_s: float,
            engine_alive=lambda: True, cancelled=lambda: False) -> ClientOutcome:
        """Run guidellm on `spec`; kill the client past `timeout_s`, soon after the engine dies,
        or at once when `cancelled()` says the trial was stopped from outside."""
        workdir.mkdir(parents=True, exist_ok=True)
        spec_path = workdir / f"{name}.scenario.json"
        spec_path.write_text(json.dumps(spec, indent=1))
        log_path = workdir / f"{name}.guidellm.log"
        report = Path(spec["outputs"][0]["path"])
        started = time.monotonic()
        client = self._client
        if client is None or not client.alive():
            client = self._start(log_path, host_wait_s=self.HOST_WAIT_S)
        reply: list[str] = []

        def replied() -> bool:
            try:
                line = client.replies.readline()
            except (BlockingIOError, ValueError):
                return False
            if line:
                reply.append(line)
            return bool(reply)

        try:
            client.send(json.dumps({"spec": str(spec_path), "log": str(log_path)}) + "\n")
        except (BrokenPipeError, OSError):
            pass  # the client died; its exit code is the outcome
        timed_out = _wait(client, replied, started=started, timeout_s=timeout_s, engine_alive=engine_alive,
                          cancelled=cancelled, replies=client.replies)
        if reply:
            returncode: int | None = json.loads(reply[0]).get("rc", 1)
        else:
            # stopped mid-run, or the client died: the next run gets a fresh one
            self.close(wait_s=0)
            returncode = None if timed_out else client.returncode()
        return ClientOutcome(returncode, timed_out, time.monotonic() - started, log_path, report, client.pid,
                             client.forked)

    def close(self, wait_s: float = 5.0) -> None:
        """End the client: after `wait_s` for it to exit by itself (end of requests), its group is killed."""
        client, self._client = self._client, None
        if client is not None:
            client.end(wait_s)
            _kill_group_remnants(client.pid)
        if self._watchdog is not None:
            self._watchdog.kill()
            self._watchdog.wait(timeout=5)
            self._watchdog = None


def _kill_group_remnants(pgid: int) -> None:
    """guidellm's forkserver and workers are in the client's group; a client that exited can
    leave them behind."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_group(pgid: int, wait) -> None:
    """SIGTERM, then SIGKILL, to group `pgid`; `wait(timeout)` waits for its leader."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        try:
            wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue
