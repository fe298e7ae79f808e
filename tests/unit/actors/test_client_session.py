"""One guidellm client process serves every run of a trial (actors/bench_client.py): real guidellm
against a real `guidellm mock-server`, started and stopped by process group. Each test runs twice:
with a client process of the trial's own, and with clients forked by the node's client host
(actors/client_host.py, a real host process that imported guidellm once)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from actors.bench_client import ClientSession, scenario_spec
from actors.client_host import ClientHost
from actors.tokenizer import resolve_tokenizer
from farm.analysis.results import parse_benchmark
from farm.study.spec import DataSpec, ProfileSpec
import sweeptools
from sweeptools import HANG_S

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mock_server():
    # One server for the module: it keeps no state between runs that a test reads (each run sends its
    # own requests), and its start (~3 s of guidellm's imports) was most of each test's setup.
    with sweeptools.mock_server(ttft_ms=20, itl_ms=20) as url:
        yield url


@pytest.fixture(scope="module")
def host():
    owner = ClientHost()
    try:
        yield owner
    finally:
        os.killpg(owner.pid(), signal.SIGTERM)  # what its watchdog does when the owning actor goes
        owner.proc.wait(timeout=HANG_S)
        owner.watchdog.kill()
        owner.watchdog.wait()


@pytest.fixture(params=["own", "forked"])
def session(request):
    """A trial's client session: its own client process, or clients forked by the node's host."""
    if request.param == "own":
        return ClientSession()
    owner = request.getfixturevalue("host")
    return ClientSession(host=owner.address)


def _spec(target: str, out, requests: int, output_tokens: int = 8) -> dict:
    profile = ProfileSpec(data=DataSpec(kind="synthetic", prompt_tokens=16, output_tokens=output_tokens), rate=1000,
                          requests=requests, max_concurrency=4, seed=42, max_seconds=120)
    return scenario_spec(profile, target=target, model="farm-tiny", tokenizer=resolve_tokenizer("farm:tiny", "farm-tiny"),
                         output=out)


def _group_alive(pgid: int, wait_s: float = HANG_S) -> bool:
    """Whether a process of group `pgid` still runs after waiting up to `wait_s` (a bound on a hang,
    not a time asserted) for it to end (zombies waiting for their reaper do not count)."""
    from pathlib import Path

    deadline = time.monotonic() + wait_s
    while True:
        running = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                running.append(stat.parent.name)
        if not running or time.monotonic() > deadline:
            return bool(running)
        time.sleep(0.2)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _check_kind(out, session_kind: str, host) -> None:
    """A forked client is the host's child (guidellm imported there, once); an own one is not."""
    assert out.forked == (session_kind == "forked")
    if out.forked:  # the host's child while it runs; the host reaped it (its exit code) once it ended
        reaped = Path(host.path).parent / "exits" / str(out.client_pid)
        try:
            assert _parent(out.client_pid) == host.pid()
        except FileNotFoundError:
            assert reaped.exists()


def test_one_client_process_serves_every_run(mock_server, tmp_path, session, request):
    kind = request.node.callspec.params["session"]
    host = request.getfixturevalue("host") if kind == "forked" else None
    with session:
        session.start(tmp_path / "client.log")
        pids = set()
        for i in range(2):
            out = session.run(_spec(mock_server, tmp_path / f"r{i}.json", requests=8), workdir=tmp_path, name=f"r{i}",
                              timeout_s=120)
            assert out.returncode == 0 and not out.timed_out, out.log_path.read_text()[-2000:]
            report = json.loads((tmp_path / f"r{i}.json").read_text())
            # the run's 8 requests were sent and served: none errored or came back cut short. guidellm
            # 0.8.1 may end the run before the last answer's update reaches its scheduler (about one run
            # in fifty on 2 busy cores; outcome.lost_by_client_only): such a request is lost, not failed.
            m = parse_benchmark(report["benchmarks"][0], total_requests=8)
            assert m.errored_requests == 0 and m.incomplete_requests == 0
            assert round(m.success_rate * 8) + m.client_lost_requests == 8
            # guidellm made the run's 8 prompts ahead, not its default 4,096 (bench_client.GUIDELLM_PREFETCH)
            assert report["config"]["spec"]["data_loader"]["prefetch_factor"] == 8
            _check_kind(out, kind, host)
            pids.add(out.client_pid)
        (pid,) = pids  # the same process served both runs, guidellm loaded once
        assert session.pid == pid
    assert not _group_alive(pid)  # closing ends the client and guidellm's forkserver and workers


def test_a_run_past_its_limit_kills_the_client_and_the_next_run_gets_a_new_one(mock_server, tmp_path, session, request):
    kind = request.node.callspec.params["session"]
    host = request.getfixturevalue("host") if kind == "forked" else None
    with session:
        session.start(tmp_path / "client.log")
        # 2000 long requests cannot end within a 1 s limit
        slow = _spec(mock_server, tmp_path / "slow.json", requests=2000, output_tokens=400)
        first = session.run(slow, workdir=tmp_path, name="slow", timeout_s=1)
        assert first.timed_out and first.returncode is None
        _check_kind(first, kind, host)
        # the whole process group went with it
        assert session.pid is None and not _group_alive(first.client_pid)
        again = session.run(_spec(mock_server, tmp_path / "ok.json", requests=4), workdir=tmp_path, name="ok",
                            timeout_s=120)
        assert again.returncode == 0 and not again.timed_out
        assert again.client_pid != first.client_pid
        _check_kind(again, kind, host)  # a host's client killed, the next is forked by the host again
        assert json.loads((tmp_path / "ok.json").read_text())["benchmarks"]


def test_a_run_stopped_while_guidellm_sends_requests_leaves_no_worker(mock_server, tmp_path, session, request):
    kind = request.node.callspec.params["session"]
    host = request.getfixturevalue("host") if kind == "forked" else None
    with session:
        session.start(tmp_path / "client.log")
        slow = _spec(mock_server, tmp_path / "slow.json", requests=2000, output_tokens=400)
        log = tmp_path / "slow.guidellm.log"
        # stopped from outside (as a cancelled trial is) once guidellm's benchmark has begun sending
        sending = lambda: log.exists() and "): started" in log.read_text(errors="replace")  # noqa: E731
        out = session.run(slow, workdir=tmp_path, name="slow", timeout_s=HANG_S, cancelled=sending)
        assert sending() and not out.timed_out and out.returncode != 0, (out, log.read_text()[-3000:] if log.exists() else None)
        _check_kind(out, kind, host)
        # the whole process group went with it: no guidellm worker left sending requests
        assert session.pid is None and not _group_alive(out.client_pid)


def test_a_host_that_is_gone_leaves_the_trial_its_own_client(mock_server, tmp_path):
    """A host that cannot fork (its process ended) costs the trial nothing but the import it saved."""
    owner = ClientHost()
    assert owner.address(HANG_S)
    os.killpg(owner.pid(), signal.SIGKILL)
    owner.proc.wait()
    with ClientSession(host=owner.address) as session:
        out = session.run(_spec(mock_server, tmp_path / "r.json", requests=4), workdir=tmp_path, name="r",
                          timeout_s=120)
        assert out.returncode == 0 and not out.forked
    owner.watchdog.kill()
    owner.watchdog.wait()
    shutil.rmtree(owner.dir)  # a killed host leaves its socket's directory (an ended one removes it)
