"""What a trial asks of its engine besides the benchmark: the prefix cache reset before every run,
the engine's own counters around a run, and its version (package metadata where it can say; else
its `--version`), and the Python it runs in."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx


def reset_prefix_cache(engine, base_url: str) -> bool | None:
    """Whether the engine's prefix cache was reset; None where the engine has no reset endpoint."""
    if not engine.reset_cache_path:
        return None
    try:
        resp = httpx.post(base_url + engine.reset_cache_path, timeout=30)
        return resp.status_code < 300
    except httpx.HTTPError:
        return False


def engine_counters(engine, base_url: str) -> dict[str, float]:
    """The engine's counters farm reads from its metrics endpoint now; {} where it has none or fails."""
    if not (engine.metrics_path and engine.counters):
        return {}
    try:
        resp = httpx.get(base_url + engine.metrics_path, timeout=10)
        return engine.parse_counters(resp.text) if resp.status_code == 200 else {}
    except httpx.HTTPError:
        return {}


def engine_version(engine, spec, env: dict[str, str]) -> str | None:
    """The engine's version, or None where neither its metadata nor its version command says."""
    own = engine.own_version(spec)
    if own is not None:
        return own
    cmd = engine.version_command(spec)
    if not cmd:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        return engine.parse_version(out.stdout + out.stderr)
    except (OSError, subprocess.TimeoutExpired):
        return None


def engine_python(launcher: list[str], env: dict[str, str]) -> str | None:
    """The Python the engine runs in, from its launcher: the launcher itself where it is a Python,
    else the interpreter beside its entry point (a venv's); None where there is none to find."""
    python = launcher[0] if launcher and Path(launcher[0]).name.startswith("python") else None
    if python is None and launcher:
        found = shutil.which(launcher[0], path=env.get("PATH"))
        if found and (Path(found).parent / "python").exists():
            python = str(Path(found).parent / "python")  # a venv's entry point: its own interpreter
    return python
