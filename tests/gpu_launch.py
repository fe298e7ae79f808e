"""GPU launch tests: start the adapter's exact command under farm's own process supervision
(`farm.proc.EngineProcess`, as a trial does), wait until ready, reset the cache, stop."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from farm.engines.base import Engine
from actors.proc import EngineProcess, clean_env
from farm.study.spec import EngineSpec
from farm.study.trial import Trial


def serve_once(engine: Engine, spec: EngineSpec, trial: Trial, log: Path, port: int) -> str:
    """The engine's log after it became ready and accepted a prefix-cache reset."""
    proc = EngineProcess(engine.command(spec, trial, port=port), clean_env(dict(os.environ), engine.env(spec, trial)), log)
    proc.start()
    try:
        base = f"http://127.0.0.1:{port}"
        proc.wait_ready(base + engine.ready_path, timeout_s=900, interval_s=2)
        assert httpx.post(base + engine.reset_cache_path, timeout=30).status_code < 300
        return log.read_text()
    finally:
        proc.stop()
