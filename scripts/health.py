"""Waiting for a server the scripts start (bench/chaos.py's `farm server`, serve_tiny_model.py's
`vllm serve`): its /health polled, the process polled on every loop, so that a crash and a timeout
are different answers (the house's rule, as farm's own engine process keeps it: actors/proc.py)."""

from __future__ import annotations

import subprocess
import time

import httpx


def wait_healthy(proc: subprocess.Popen, url: str, timeout_s: float, *, interval_s: float = 1.0,
                 request_timeout_s: float = 2.0) -> str:
    """'ready' once `url` answers 200, 'exited' when `proc` ended first, 'timeout' after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return "exited"
        try:
            if httpx.get(url, timeout=request_timeout_s).status_code == 200:
                return "ready"
        except httpx.HTTPError:
            pass
        time.sleep(interval_s)
    return "timeout"
