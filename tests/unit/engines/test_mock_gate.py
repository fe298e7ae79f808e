"""The mock engine's admission gate (farm/engines/mock_gate.py): N requests at once, the rest queued."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time

import httpx

from farm.engines import get_engine
from farm.study.spec import EngineSpec
from farm.study.trial import Trial

MOCK = get_engine("mock")


def _trial(**flags) -> Trial:
    return Trial(id="mock-1", engine="mock", model_key="tiny", model="farm-tiny", flags=flags, profiles=["p"])


def test_the_gate_listens_on_the_trial_s_port_and_the_server_never_sees_the_flag():
    argv = MOCK.command(EngineSpec(), _trial(**{"admission-limit": 3, "ttft-ms": 100}), port=8123)
    cut = argv.index("--")
    assert argv[1].endswith("mock_gate.py") and argv[2:cut] == ["--limit", "3", "--listen-host", "127.0.0.1",
                                                               "--listen-port", "8123"]
    server = argv[cut + 1:]
    assert "mock-server" in server and "--ttft-ms=100" in server
    assert not any("admission" in a or "8123" in a for a in server)
    assert "mock_gate.py --limit 3 --listen-host 127.0.0.1 -- " in MOCK.serve_command(EngineSpec(), _trial(
        **{"admission-limit": 3}))
    # without the flag the server is started as before
    assert "mock_gate.py" not in " ".join(MOCK.command(EngineSpec(), _trial(), port=8123))


async def _first_tokens(url: str, n: int) -> list[float]:
    body = {"model": "farm-tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 4}
    async with httpx.AsyncClient(timeout=30) as client:
        async def one(start: float) -> float:
            async with client.stream("POST", url + "/v1/chat/completions", json=body) as resp:
                assert resp.status_code == 200
                async for line in resp.aiter_lines():
                    if line.startswith("data:"):
                        return time.monotonic() - start
            raise AssertionError("no token streamed")
        start = time.monotonic()
        return sorted(await asyncio.gather(*[one(start) for _ in range(n)]))


def test_requests_past_the_limit_wait_for_a_slot_and_the_group_stops_together(tmp_path):
    port = 18000 + os.getpid() % 1000
    argv = MOCK.command(EngineSpec(), _trial(**{"admission-limit": 1, "ttft-ms": 150, "itl-ms": 10}), port=port)
    with open(tmp_path / "engine.log", "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        ttft = asyncio.run(_first_tokens(url, 3))
        # one at a time: each request waits for the one before it (about 150 ms + 4 x 10 ms)
        assert ttft[1] - ttft[0] > 0.15 and ttft[2] - ttft[1] > 0.15, ttft
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    # the mock-server (and its Sanic worker) was the gate's child, in its group: the group's
    # SIGTERM ends all of it, within the seconds the engine's stop waits before it kills
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _group_alive(proc.pid):
        time.sleep(0.2)
    assert not _group_alive(proc.pid)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
