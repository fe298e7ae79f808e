"""Lost actors and nodes, with real Ray in this process: the sweep goes on, engines do not linger.

- An actor killed with `ray.kill` in the middle of its trial: its engine is gone within 10 s
  (the engine's watchdog sees its owner die), its port is free again, and the driver retries the
  trial (node_lost is transient) to a good result.
- A simulated cluster (`ray.cluster_utils.Cluster`, a head that takes no trials and two worker
  nodes): one trial's first start finds its port taken (port_in_use, retried on the other node);
  a node is removed with `Cluster.remove_node` while a trial benchmarks on it: that trial
  finishes on the other node, its engine on the removed node is gone, and MLflow holds each
  trial once.
"""

from __future__ import annotations

import os
import queue
import threading
import time

import pytest

from sweeptools import (alive, child_runs, engine_of, port_free, profile_started, seconds_until_dead, wait_until,
                        wrapper_launcher, write_study)

pytestmark = pytest.mark.slow

QUICK = {"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8}, "rate": 1000,
         "requests": 4, "max_concurrency": 4, "max_seconds": 60}


def test_an_actor_killed_mid_trial_takes_its_engine_along_and_the_trial_is_retried(tmp_path):
    import ray

    from actors.bench import TrialJob
    from farm.driver import actor_name, run_trials
    from farm.grid import expand
    from farm.spec import load_study

    study = load_study(write_study(tmp_path / "kill.yaml", name="kill", grid="one", profile=QUICK,
                                   blocks=[{"engine": "mock", "models": ["tiny"], "name": "victim",
                                            "flags": {"itl-ms": 50}}]))
    (trial,) = expand(study, "one")
    job = TrialJob(sweep_id="kill-test", trial=trial, engine_spec=study.engines["mock"],
                   profiles={"p": study.profiles["p"]}, workdir=str(tmp_path / "runs"))
    seen: dict = {}

    def killer() -> None:
        actor = wait_until(lambda: _named(ray, actor_name("kill-test", trial, 1)), 120, what="the actor")
        # the engine answers: the trial is under way
        pid = wait_until(lambda: ray.get(actor.engine_pid.remote()), 120, what="the engine to start")
        port = ray.get(actor.engine_port.remote())
        wait_until(lambda: not port_free(port), 120, what="the engine to listen")
        seen.update(pid=pid, port=port)
        ray.kill(actor)
        seen["gone_s"] = seconds_until_dead([pid], 10)

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        events: list[tuple[str, int]] = []
        (result,) = run_trials([job], max_in_flight=1, max_retries=2,
                               on_event=lambda kind, j, r: events.append((kind, j.attempt)))
        thread.join(timeout=30)
    finally:
        ray.shutdown()
    assert seen.get("gone_s") is not None, "the engine did not end within 10 s of ray.kill"
    assert not alive(seen["pid"]) and port_free(seen["port"])
    assert ("retry", 1) in events and ("finished", 2) in events
    assert result.status.value == "ok" and result.attempt == 2
    assert len(result.previous_attempts) == 1 and ": node_lost: actor or node lost" in result.previous_attempts[0]
    assert result.engine_pid != seen["pid"]
    print(f"engine gone {seen['gone_s']:.1f} s after ray.kill")


def _named(ray, name: str):
    try:
        return ray.get_actor(name)
    except ValueError:
        return None


@pytest.fixture
def loopback_env():
    from raynodes import LOOPBACK_ENV

    saved = {k: os.environ.get(k) for k in LOOPBACK_ENV}
    os.environ.update(LOOPBACK_ENV)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_a_node_removed_mid_sweep_and_a_taken_port_are_survived(tmp_path, loopback_env):
    import ray
    from ray.cluster_utils import Cluster

    from farm import driver
    from farm.grid import expand
    from farm.spec import load_study

    study = load_study(write_study(
        tmp_path / "nodes.yaml", name="nodes", grid="three", max_concurrent=3, max_retries=2,
        profile={**QUICK, "requests": 4}, engine={"launcher": wrapper_launcher(),
                                                  "env": {"FARM_TEST_SQUAT": str(tmp_path / "squatted")}},
        blocks=[{"engine": "mock", "models": ["tiny"], "name": "squat", "flags": {"ttft-ms": 51}},
                {"engine": "mock", "models": ["tiny"], "name": "victim", "flags": {"ttft-ms": 52, "itl-ms": 400}},
                {"engine": "mock", "models": ["tiny"], "name": "bystander", "flags": {"ttft-ms": 53}}]))
    trials = expand(study, "three")
    ids = {t.name: t.id for t in trials}
    workdir = tmp_path / "runs"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    workers = [cluster.add_node(num_cpus=2) for _ in range(2)]
    cluster.wait_for_nodes()
    placed: queue.Queue = queue.Queue()
    removal: dict = {}

    def remover() -> None:
        node_id = None
        while node_id is None:
            name, attempt, node = placed.get(timeout=300)
            if name == ids["victim"] and attempt == 1:
                node_id = node
        wait_until(lambda: profile_started(workdir, ids["victim"]), 300, what="the victim's benchmark")
        removal["pid"], removal["port"] = engine_of(workdir, ids["victim"])
        removal["node"] = node_id
        print(f"[{time.monotonic() - t0:6.1f}s] removing node {node_id[:12]}", flush=True)
        cluster.remove_node(next(w for w in workers if w.node_id == node_id))
        print(f"[{time.monotonic() - t0:6.1f}s] removed", flush=True)
        removal["gone_s"] = seconds_until_dead([removal["pid"]], 10)

    t0 = time.monotonic()

    def on_event(kind, job, result) -> None:
        print(f"[{time.monotonic() - t0:6.1f}s] {kind} {job.trial.name} a{job.attempt}"
              + (f" {result.status.value}" if result else ""), flush=True)
        if kind == "placed":
            placed.put((job.trial.id, job.attempt, _node_of(ray, job)))

    try:
        ray.init(address=cluster.address, log_to_driver=False)
        thread = threading.Thread(target=remover, daemon=True)
        thread.start()
        outcome = driver.run_sweep(study, "three", trials, tracking_uri=uri, experiment="nodes", address=cluster.address,
                                   resume=None, repeats=1, workdir=workdir, command="test_lost_actors",
                                   on_event=on_event)
        thread.join(timeout=60)
    finally:
        ray.shutdown()
        cluster.shutdown()

    assert removal.get("gone_s") is not None, "the removed node's engine did not end within 10 s"
    assert not alive(removal["pid"])
    by = {r.trial.name: r for r in outcome.results}
    assert {n: r.status.value for n, r in by.items()} == {"squat": "ok", "victim": "ok", "bystander": "ok"}
    victim, squat = by["victim"], by["squat"]
    # the victim was lost with its node and finished on the other one
    assert victim.attempt >= 2 and victim.node_id != removal["node"]
    assert ": node_lost: " in victim.previous_attempts[0] and removal["node"][:12] in victim.previous_attempts[0]
    # the taken port was retried, on another node than the first start (that attempt may itself
    # have been on the removed node: then a third attempt finished the trial)
    assert squat.attempt >= 2 and ": port_in_use: " in squat.previous_attempts[0], squat.previous_attempts
    nodes = [line.split(" on node ")[1][:12] for line in squat.previous_attempts] + [squat.node_id[:12]]
    assert nodes[1] != nodes[0], squat.previous_attempts
    assert all(": node_lost: " in line for line in squat.previous_attempts[1:]), squat.previous_attempts
    # nothing duplicated: each trial id once among the sweep's child runs, each with its final answer
    runs = child_runs(uri, outcome.sweep_id)
    assert sorted(r.data.tags["farm.trial_id"] for r in runs) == sorted(ids.values())
    assert {r.data.tags["farm.status"] for r in runs} == {"ok"}
    print(f"engine on the removed node gone {removal['gone_s']:.1f} s after remove_node")


def _node_of(ray, job) -> str | None:
    """The node the trial's actor landed on (asked from the actor itself)."""
    from farm.driver import actor_name

    actor = _named(ray, actor_name(job.sweep_id, job.trial, job.attempt))
    try:
        return ray.get(actor.node.remote(), timeout=30)["node_id"] if actor else None
    except Exception:
        return None
