"""The shared MLflow server goes away in the middle of a sweep and comes back: nothing is lost.

A real `farm server`, a real sweep of three short mock trials one after another (on the session's
Ray head); when the first
trial is stored the server is stopped (its process group), and started again on the same port and
store once the second trial's engine has ended. A trial ends while it is down: its actor keeps trying to store the result (and
MLflow's own HTTP retries), so the sweep ends normally with every trial in MLflow exactly once.
"""

from __future__ import annotations

import time

import pytest

from raynodes import free_ports, stop_group
from sweeptools import (HANG_S, alive, child_runs, engine_of, isolated_env, start_farm, start_farm_server, stored_results,
                        wait_until, write_study)

pytestmark = pytest.mark.slow


def test_a_tracking_server_outage_mid_sweep_loses_no_trial(tmp_path, ray_head):
    from farm.study.grid import expand
    from farm.study.load import load_study

    path = write_study(
        tmp_path / "outage.yaml", name="outage", grid="three", max_concurrent=1,
        blocks=[{"engine": "mock", "models": ["tiny"], "name": n, "flags": {"ttft-ms": t, "itl-ms": 20}}
                for n, t in (("a", 5), ("b", 6), ("c", 7))],
        profile={"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8}, "rate": 1000,
                 "requests": 4, "max_concurrency": 4, "max_seconds": 60},
    )
    ids = {t.name: t.id for t in expand(load_study(path), "three")}
    env = isolated_env(tmp_path)
    (port,) = free_ports(1)
    uri = f"http://127.0.0.1:{port}"
    store, server_log = tmp_path / "store", tmp_path / "server.log"
    server = start_farm_server(store, port, env=env, log=server_log)
    log = tmp_path / "sweep.out"
    workdir = tmp_path / "farm-runs"
    # on the session's Ray head (tests/conftest.py): Ray's own start and end are not this test's subject
    sweep = start_farm("sweep", "--config", str(path), "--grid", "three", "--tracking-uri", uri,
                       "--workdir", str(workdir), "--address", ray_head, cwd=tmp_path, log=log)
    try:
        wait_until(lambda: sweep.poll() is not None or "[1/3]" in log.read_text(), 400, what="the first trial")
        assert sweep.poll() is None, log.read_text()[-3000:]
        stop_group(server)
        down = time.time()

        def b_ended() -> bool:  # trial b's engine started and stopped: b's result is made, to be stored
            engine = engine_of(workdir, ids["b"])
            return sweep.poll() is not None or bool(engine and not alive(engine[0]))
        wait_until(b_ended, 400, what="trial b to end while the server is down")
        assert sweep.poll() is None, log.read_text()[-3000:]
        server = start_farm_server(store, port, env=env, log=server_log, timeout=HANG_S)
        up = time.time()  # the server answers again
        sweep.wait(timeout=600)
        out = log.read_text()
        assert sweep.returncode == 0, out[-4000:]
        assert "Traceback" not in out and "recommended" in out
        sweep_id = out.split("sweep id: ", 1)[1].split()[0]
        runs = child_runs(uri, sweep_id)
        results = stored_results(uri, runs, tmp_path)
    finally:
        if sweep.poll() is None:
            sweep.kill()
        stop_group(server)
    assert sorted(r.data.tags["farm.trial_id"] for r in runs) == sorted(ids.values())  # each trial once
    assert {r.data.tags["farm.status"] for r in runs} == {"ok"}
    # the outage did hit a trial's end: one finished while the server was down
    assert any(down <= r["finished_at"] <= up for r in results), (down, up, [r["finished_at"] for r in results])
