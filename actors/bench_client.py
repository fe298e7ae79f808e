"""The guidellm client of one benchmark run: scenario spec (pure) and the child process that runs it."""

from __future__ import annotations

import json
import os
import select
import signal
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
    constraints: list[dict] = [{"kind": "max_requests", "count": requests or profile.requests}]
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


def _client_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.setdefault("GUIDELLM__MAX_WORKER_PROCESSES", DEFAULT_WORKERS)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def _wait(proc: subprocess.Popen, done, *, started: float, timeout_s: float, engine_alive, cancelled,
          replies=None) -> bool:
    """Poll until `done()`, the client process exits, the time limit passes (-> True: timed out),
    the trial is cancelled, or the engine has been dead for 20 s. With `replies` (the client's
    reply pipe) a reply ends the wait as it comes, not at the next 0.1 s tick."""
    engine_gone_at: float | None = None
    while not done() and proc.poll() is None:
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


def run_client(spec: dict, *, workdir: Path, name: str, timeout_s: float,
               engine_alive=lambda: True, cancelled=lambda: False) -> ClientOutcome:
    """One run in a client process of its own (see `ClientSession` for a trial's runs)."""
    with ClientSession() as session:
        return session.run(spec, workdir=workdir, name=name, timeout_s=timeout_s, engine_alive=engine_alive,
                           cancelled=cancelled)


class ClientSession:
    """One guidellm client process (`actors.guidellm_worker --serve`) for all runs of a trial, in
    its own process group, watched like the engine so that it never outlives the actor.

    A run that times out, is cancelled or outlives its engine kills the process group; the next
    run starts a new client process. Each run's output goes to its own log file."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._watchdog: subprocess.Popen | None = None
        self._replies = None

    def __enter__(self) -> ClientSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The client process (and its process group), while one runs."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def start(self, log_path: Path) -> None:
        """Start the client process now (it loads guidellm while, say, the engine starts)."""
        if self._proc is None or self._proc.poll() is not None:
            self._start(log_path)

    def _start(self, log_path: Path) -> subprocess.Popen:
        read_fd, write_fd = os.pipe()
        with open(log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "actors.guidellm_worker", "--serve", str(write_fd)],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write_fd,),
                env=_client_env(), start_new_session=True, text=True)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        self._replies = os.fdopen(read_fd, "r")
        self._watchdog = watch_group(self._proc.pid, 5.0)
        return self._proc

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
        proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start(log_path)
        reply: list[str] = []

        def replied() -> bool:
            try:
                line = self._replies.readline()
            except (BlockingIOError, ValueError):
                return False
            if line:
                reply.append(line)
            return bool(reply)

        try:
            proc.stdin.write(json.dumps({"spec": str(spec_path), "log": str(log_path)}) + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the client died; its exit code is the outcome
        timed_out = _wait(proc, replied, started=started, timeout_s=timeout_s, engine_alive=engine_alive,
                          cancelled=cancelled, replies=self._replies)
        if reply:
            returncode: int | None = json.loads(reply[0]).get("rc", 1)
        else:
            # stopped mid-run, or the client died: the next run gets a fresh one
            self.close(wait_s=0)
            returncode = None if timed_out else proc.returncode
        return ClientOutcome(returncode, timed_out, time.monotonic() - started, log_path, report)

    def close(self, wait_s: float = 5.0) -> None:
        """End the client: after `wait_s` for it to exit by itself (end of requests), its group is killed."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None and wait_s > 0:
                try:
                    proc.stdin.close()
                    proc.wait(timeout=wait_s)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            if proc.poll() is None:
                _kill_group(proc)
            _kill_group_remnants(proc.pid)
        if self._watchdog is not None:
            self._watchdog.kill()
            self._watchdog.wait(timeout=5)
            self._watchdog = None
        if self._replies is not None:
            self._replies.close()
            self._replies = None


def _kill_group_remnants(pgid: int) -> None:
    """guidellm's forkserver and workers are in the client's group; a client that exited can
    leave them behind."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue
