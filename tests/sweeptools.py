"""Helpers of the failure, resume and secret tests: small studies, `farm sweep` as a process a
test can signal, and checks that processes and ports are gone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import yaml

REPO = Path(__file__).resolve().parent.parent
WRAPPER = Path(__file__).resolve().parent / "fixtures" / "engines" / "mock_wrapper.py"


def write_study(path: Path, *, name: str, grid: str, blocks: list[dict], profile: dict | None = None,
                engine: dict | None = None, max_concurrent: int = 2, **extra) -> Path:
    """A mock study with one profile `p` and one grid of `blocks` (tiny, for 2 cores)."""
    data = {
        "name": name,
        "primary_profile": "p",
        "models": {"tiny": {"name": "farm-tiny", "tokenizer": "farm:tiny"}},
        "engines": {"mock": {"ready_timeout_s": 90, **(engine or {})}},
        "profiles": {"p": profile or {"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8},
                                      "rate": 1000, "requests": 8, "max_concurrency": 4, "max_seconds": 60}},
        "grids": {grid: {"max_concurrent_trials": max_concurrent, "blocks": blocks}},
        **extra,
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def slow_mock_sweep(tmp_path: Path, *, name: str, trials: str, itl_ms: int) -> tuple[Path, str, list[str], list[str]]:
    """A mock sweep of one trial per letter of `trials`, run one at a time, slow enough (`itl_ms`) to
    be caught mid-trial: (tmp_path, tracking URI, `farm sweep` arguments, trial ids)."""
    from farm.study.grid import expand
    from farm.study.load import load_study

    path = write_study(tmp_path / "s.yaml", name=name, grid="g", max_concurrent=1,
                       blocks=[{"engine": "mock", "models": ["tiny"], "name": n, "flags": {"ttft-ms": 5 + i, "itl-ms": itl_ms}}
                               for i, n in enumerate(trials)],
                       profile={"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8}, "rate": 1000,
                                "requests": 4, "max_concurrency": 4, "max_seconds": 60})
    ids = [t.id for t in expand(load_study(str(path)), "g")]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["sweep", "--config", str(path), "--grid", "g", "--tracking-uri", uri, "--workdir", str(tmp_path / "w")]
    return tmp_path, uri, args, ids


def quick_pair_study(name: str, grid: str, max_concurrent: int, steps: bool = False) -> str:
    """A study of two mock trials (the default and one 50 ms slower to its first token) on one short
    profile, the smoke study's models and engines included: the pair several multi-node tests race.
    `steps`: an ordered grid, `a` then `b` after it (a step of a stepwise study)."""
    a, b = ("{name: a, engine: mock, models: [tiny]}", "{name: b, engine: mock, models: [tiny], flags: {ttft-ms: 50}, "
            "after: a}") if steps else ("{engine: mock, models: [tiny]}", "{engine: mock, models: [tiny], flags: {ttft-ms: 50}}")
    return f"""
include: [{REPO / 'configs' / 'smoke.yaml'}]
name: {name}
experiment: {name}
primary_profile: quick
min_success_rate: 0.9
profiles:
  quick:
    data: {{kind: synthetic, prompt_tokens: 16, output_tokens: 8}}
    rate: 1000
    requests: 16
    max_concurrency: 4
    max_seconds: 60
grids:
  {grid}:
    ordered: {str(steps).lower()}
    profiles: [quick]
    max_concurrent_trials: {max_concurrent}
    blocks:
      - {a}
      - {b}
"""


def route_study(path: Path, *, name: str = "routes") -> Path:
    """The tests of a route to the cluster or the store (server auth, the Jobs API, Ray Client):
    two mock trials, one profile, both at once (one on each node of a two-node cluster). `fast`
    (TTFT 50 ms, ITL 10 ms) serves a request in a quarter of `slow`'s time and is recommended."""
    return write_study(path, name=name, grid="two", max_concurrent=2, blocks=[
        {"engine": "mock", "models": ["tiny"], "name": "fast", "flags": {"ttft-ms": 50, "itl-ms": 10}},
        {"engine": "mock", "models": ["tiny"], "name": "slow", "flags": {"ttft-ms": 200, "itl-ms": 40}}],
        profile={"data": {"kind": "synthetic", "prompt_tokens": 32, "output_tokens": 16}, "rate": 1000,
                 "requests": 8, "max_concurrency": 4, "max_seconds": 60, "slo": {"min_success_rate": 0.5}})


def wrapper_launcher() -> list[str]:
    return [sys.executable, str(WRAPPER)]


def start_farm(*args: str, cwd: Path, env: dict | None = None, log: Path) -> subprocess.Popen:
    """`farm ...` as a user runs it, in the background, output to `log` (never an unread pipe)."""
    out = open(log, "w")
    return subprocess.Popen([sys.executable, "-m", "farm.cli", *args], cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"  # a zombie is dead here
    except OSError:
        return False


def client_hosts(mark: str) -> list[int]:
    """Processes running a node's client host (`python -m actors.client_host SOCKET`) whose
    environment holds `mark` (`NAME=VALUE`): those of one sweep, not of another running beside it."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if (b"actors.client_host" in cmdline.read_bytes().split(b"\0")
                    and mark.encode() in (cmdline.parent / "environ").read_bytes().split(b"\0")):
                pids.append(int(cmdline.parent.name))
        except OSError:  # gone meanwhile
            continue
    return pids


# How long a wait for a state goes on before a test calls it a hang: generous on 2 busy cores.
HANG_S = 120


def wait_until(predicate, timeout: float, interval: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def seconds_until_dead(pids: list[int], timeout: float = HANG_S) -> float:
    """Seconds until every pid is gone (for the log, never for an assert); fails past `timeout`,
    which only bounds a hang."""
    started = time.monotonic()
    wait_until(lambda: not any(alive(p) for p in pids), timeout, 0.1, f"processes {pids} to end")
    return time.monotonic() - started


def port_free(port: int) -> bool:
    """A server could listen on `port` now. SO_REUSEADDR as servers set it: connections the
    stopped engine closed linger in TIME_WAIT on its port without holding it."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def trial_dir(workdir: Path, trial_id: str, attempt: int = 1) -> Path | None:
    """The newest directory of this attempt (a trial run again after a stopped driver gets
    `attempt-N.2`, `attempt-N.3`...)."""
    found = [*Path(workdir).glob(f"*/{trial_id}/attempt-{attempt}"), *Path(workdir).glob(f"*/{trial_id}/attempt-{attempt}.*")]
    return max(found, key=lambda p: p.stat().st_mtime_ns) if found else None


def engine_of(workdir: Path, trial_id: str, attempt: int = 1) -> tuple[int, int] | None:
    """(pid, port) of a trial's engine while it runs (the actor writes engine.pid)."""
    d = trial_dir(workdir, trial_id, attempt)
    if d is None or not (d / "engine.pid").is_file():
        return None
    text = (d / "engine.pid").read_text().split()
    return (int(text[0]), int(text[1])) if len(text) == 2 else None


def profile_started(workdir: Path, trial_id: str, attempt: int = 1) -> bool:
    """guidellm has begun sending the trial's first benchmark run."""
    d = trial_dir(workdir, trial_id, attempt)
    if d is None:
        return False
    return any("): started" in p.read_text(errors="replace") for p in d.glob("*.guidellm.log"))


def child_runs(uri: str, sweep_id: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_run(sweep_id).info.experiment_id
    return client.search_runs([exp], filter_string=f"tags.`mlflow.parentRunId` = '{sweep_id}'")


def stored_results(uri: str, runs, dest: Path) -> list[dict]:
    """The result.json each trial run stored in MLflow, as the tracking server hands it out."""
    import json

    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    return [json.loads(Path(client.download_artifacts(r.info.run_id, "result.json", str(dest))).read_text())
            for r in runs]


def ray_tmpdir() -> Path:
    """A folder of its own for Ray's sessions (`RAY_TMPDIR`: a Ray that starts writes its session
    there), short: Ray's socket paths are limited to 107 bytes. The caller removes it."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="farm-rt-", dir="/tmp"))


def isolated_env(home: Path, **extra: str) -> dict[str, str]:
    """This machine's environment without any Ray or MLflow setting, a HOME of its own (no
    ~/.ray/auth_token or ~/.mlflow/credentials of the machine's user is read), and `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "MLFLOW_TRACKING"))}
    return {**env, "HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0", **extra}


def start_farm_server(store: Path, port: int, *, env: dict[str, str], log: Path, auth: bool = False,
                      timeout: float = 120) -> subprocess.Popen:
    """`farm server` in its own process group (stop it with raynodes.stop_group), answering /health."""
    import httpx

    argv = [sys.executable, "-m", "farm.cli", "server", "--store", str(store), "--port", str(port), "--workers", "1"]
    with open(log, "ab") as fh:
        proc = subprocess.Popen(argv + (["--auth"] if auth else []), cwd=log.parent, env=env, stdout=fh,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"farm server did not come up: {log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)


def shape_config() -> dict:
    """Qwen3.5-35B-A3B's config.json as scripts/make-shape-model.py writes it (its language model),
    for the memory-fit tests: the real shape, no model directory needed."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_shape_model", REPO / "scripts" / "make-shape-model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"text_config": {**mod.TEXT, "model_type": "qwen3_5_moe_text"}}



@contextmanager
def mock_server(*, ttft_ms: int, itl_ms: int, model: str = "farm-tiny") -> Iterator[str]:
    """A real `guidellm mock-server` on a free loopback port, its own session, up until /health
    answers (60 s at most); yields its URL and stops it by its process group."""
    import signal

    import httpx

    from actors.proc import free_port

    port = free_port("127.0.0.1")
    proc = subprocess.Popen([sys.executable, "-m", "guidellm", "mock-server", f"--model={model}", "--host=127.0.0.1",
                             f"--port={port}", f"--ttft-ms={ttft_ms}", f"--itl-ms={itl_ms}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("mock-server did not start")
                time.sleep(0.3)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
