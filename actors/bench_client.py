"""The guidellm client of one benchmark run: scenario spec (pure) and the child process that runs it."""

from __future__ import annotations

import json
import os
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


def run_client(spec: dict, *, workdir: Path, name: str, timeout_s: float,
               engine_alive=lambda: True, cancelled=lambda: False) -> ClientOutcome:
    """Run guidellm in a child process group; kill the group past `timeout_s`, soon after the
    engine dies, or at once when `cancelled()` says the trial was stopped from outside."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec_path = workdir / f"{name}.scenario.json"
    spec_path.write_text(json.dumps(spec, indent=1))
    log_path = workdir / f"{name}.guidellm.log"
    report = Path(spec["outputs"][0]["path"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.setdefault("GUIDELLM__MAX_WORKER_PROCESSES", DEFAULT_WORKERS)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    started = time.monotonic()
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "actors.guidellm_worker", str(spec_path)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    # Like the engine, the client must not outlive the actor that started it.
    watchdog = watch_group(proc.pid, 5.0)
    timed_out = False
    engine_gone_at: float | None = None
    try:
        while proc.poll() is None:
            now = time.monotonic()
            if now - started > timeout_s:
                timed_out = True
                break
            if cancelled():
                break
            if engine_gone_at is None and not engine_alive():
                engine_gone_at = now
            # A dead engine makes every request fail fast; give guidellm a moment to write its
            # report, then stop waiting for it.
            if engine_gone_at is not None and now - engine_gone_at > 20:
                break
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            _kill_group(proc)
        watchdog.kill()
        watchdog.wait(timeout=5)
    return ClientOutcome(proc.returncode if not timed_out else None, timed_out,
                         time.monotonic() - started, log_path, report)


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
