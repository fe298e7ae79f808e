"""The mock engine's admission gate (farm/engines/mock_gate.py): N requests at once, the rest queued."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess

import httpx

from actors.proc import free_port
from farm.engines import get_engine
from farm.study.spec import EngineSpec
from farm.study.trial import Trial
from sweeptools import HANG_S, wait_until

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


async def _streams(url: str, n: int) -> list[tuple[str, int]]:
    """`n` streamed requests sent at once; the order in which their first tokens and their ends
    arrived: ("first", i) and ("end", i)."""
    body = {"model": "farm-tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 4}
    events: list[tuple[str, int]] = []
    async with httpx.AsyncClient(timeout=60) as client:
        async def one(i: int) -> None:
            async with client.stream("POST", url + "/v1/chat/completions", json=body) as resp:
                assert resp.status_code == 200
                async for line in resp.aiter_lines():
                    if line.startswith("data:") and ("first", i) not in events:
                        events.append(("first", i))
            assert ("first", i) in events, "no token streamed"
            events.append(("end", i))
        await asyncio.gather(*[one(i) for i in range(n)])
    return events


def test_requests_past_the_limit_wait_for_a_slot_and_the_group_stops_together(tmp_path):
    port = free_port()
    argv = MOCK.command(EngineSpec(), _trial(**{"admission-limit": 1, "ttft-ms": 150, "itl-ms": 10}), port=port)
    with open(tmp_path / "engine.log", "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            try:
                return httpx.get(url + "/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False
        wait_until(healthy, HANG_S, what="the gate and its mock-server")
        events = asyncio.run(_streams(url, 3))
        # one at a time: a request's first token comes only after the one before it ended
        in_flight, most = 0, 0
        for kind, _ in events:
            in_flight += 1 if kind == "first" else -1
            most = max(most, in_flight)
        assert most == 1 and len(events) == 6, events
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=HANG_S)
    # the mock-server (and its Sanic worker) was the gate's child, in its group: the group's
    # SIGTERM ends all of it
    wait_until(lambda: not _group_alive(proc.pid), HANG_S, what="the gate's process group to end")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
