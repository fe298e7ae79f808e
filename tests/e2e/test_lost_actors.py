"""Lost actors and nodes, with real Ray in this process: the sweep goes on, engines do not linger.

One sweep on the session's simulated cluster (tests/conftest.py, `sim_cluster`: a head that takes
no trials and two worker nodes; this test runs after its other users, since it removes a node),
three trials, three incidents, all real:
- `squat`: its first start finds its port taken by another process (a real EADDRINUSE from the
  mock server): port_in_use, retried on the other node;
- `bystander`: its actor is killed with `ray.kill` once its engine listens: the engine is gone
  within 10 s (its watchdog sees the actor's process die), the port is free, and the trial is
  retried (node_lost) to a good result;
- `victim`: its node is removed with `Cluster.remove_node` while it benchmarks: its engine on
  that node is gone within 10 s and the trial finishes on the other node.
MLflow holds each trial once, with its final answer.
"""

from __future__ import annotations

import queue
import threading
import time

import pytest

from sweeptools import (HANG_S, alive, child_runs, engine_of, port_free, profile_started, seconds_until_dead, wait_until,
                        wrapper_launcher, write_study)

pytestmark = [pytest.mark.slow, pytest.mark.destroys_sim_cluster]

PROFILE = {"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8}, "rate": 1000,
           "requests": 4, "max_concurrency": 4, "max_seconds": 60}


def _named(ray, name: str, sweep_id: str):
    from farm.run.ray_names import sweep_namespace

    try:
        return ray.get_actor(name, namespace=sweep_namespace(sweep_id))
    except ValueError:
        return None


@pytest.fixture(scope="module")
def lost(tmp_path_factory, sim_cluster):
    import ray

    from farm.run import driver
    from farm.run.events import SweepEvents
    from farm.run.sweep_plan import SweepPlan
    from farm.run.ray_names import actor_name
    from farm.study.grid import expand
    from farm.study.load import load_study

    tmp = tmp_path_factory.mktemp("lost")
    study = load_study(write_study(
        tmp / "lost.yaml", name="lost", grid="three", max_concurrent=2, max_retries=2, profile=PROFILE,
        engine={"launcher": wrapper_launcher(), "env": {"FARM_TEST_SQUAT": str(tmp / "squatted")}},
        blocks=[{"engine": "mock", "models": ["tiny"], "name": "squat", "flags": {"ttft-ms": 51}},
                {"engine": "mock", "models": ["tiny"], "name": "victim", "flags": {"ttft-ms": 52, "itl-ms": 1500}},
                {"engine": "mock", "models": ["tiny"], "name": "bystander", "flags": {"ttft-ms": 53}}]))
    trials = expand(study, "three")
    ids = {t.name: t.id for t in trials}
    names = {v: k for k, v in ids.items()}
    workdir = tmp / "runs"
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    placed: queue.Queue = queue.Queue()
    placements: dict[tuple[str, int], str | None] = {}
    incidents: dict = {}
    incident_threads: list[threading.Thread] = []
    log: list[str] = []
    t0 = time.monotonic()

    def note(text: str) -> None:
        log.append(f"[{time.monotonic() - t0:6.1f}s] {text}")

    def kill_actor(actor) -> None:
        pid = wait_until(lambda: ray.get(actor.engine_pid.remote()), 120, what="the bystander's engine")
        port = ray.get(actor.engine_port.remote())
        wait_until(lambda: not port_free(port), 120, what="the bystander's engine to listen")
        note(f"ray.kill bystander (engine {pid} on port {port})")
        ray.kill(actor)
        incidents["kill"] = dict(pid=pid, port=port, gone_s=seconds_until_dead([pid]))

    def remove_node(node_id: str) -> None:
        wait_until(lambda: profile_started(workdir, ids["victim"]), 300, what="the victim's benchmark")
        # Not before the taken port's retry found its node: while both nodes live, it has a choice.
        wait_until(lambda: ("squat", 2) in placements, 300, what="the second start of 'squat'")
        pid, port = engine_of(workdir, ids["victim"])
        note(f"remove_node {node_id[:12]} (victim's engine {pid})")
        sim_cluster.cluster.remove_node(next(w for w in sim_cluster.workers if w.node_id == node_id))
        incidents["remove"] = dict(pid=pid, port=port, node=node_id, gone_s=seconds_until_dead([pid]))

    def incidents_thread() -> None:
        todo = {"bystander", "victim"}
        while todo:
            trial_id, attempt, node, actor = placed.get(timeout=300)
            name = names[trial_id]
            if attempt == 1 and name in todo:
                todo.discard(name)
                target = kill_actor if name == "bystander" else remove_node
                thread = threading.Thread(target=target, args=(actor if name == "bystander" else node,), daemon=True)
                thread.start()
                incident_threads.append(thread)

    def on_event(kind, job, result) -> None:
        note(f"{kind} {names[job.trial.id]} a{job.attempt}" + (f" {result.status.value}" if result else ""))
        if kind == "placed":
            actor = _named(ray, actor_name(job.sweep_id, job.trial, job.attempt), job.sweep_id)
            node = ray.get(actor.node.remote(), timeout=60)["node_id"] if actor else None
            placements[(names[job.trial.id], job.attempt)] = node
            placed.put((job.trial.id, job.attempt, node, actor))

    sim_cluster.connect()
    try:
        watcher = threading.Thread(target=incidents_thread, daemon=True)
        watcher.start()
        class Heard(SweepEvents):
            def on_trial(self, kind, job, result) -> None:
                on_event(kind, job, result)

        outcome = driver.run_sweep(SweepPlan(study=study, grid="three", trials=trials, tracking_uri=uri, experiment="lost",
                                             address=sim_cluster.address, resume=None, repeats=1, workdir=workdir,
                                             command="test_lost_actors"), Heard())
        # the incidents recorded what they saw (an engine's end), each bounded by its own wait
        watcher.join(HANG_S)
        for thread in incident_threads:
            thread.join(HANG_S)
    finally:
        sim_cluster.shutdown()  # a node of it is gone: no test uses it after this one
    print("\n".join(log))
    return dict(outcome=outcome, by={r.trial.name: r for r in outcome.results}, ids=ids, uri=uri,
                incidents=incidents, log=log)


def test_every_trial_ends_ok_and_is_in_mlflow_once(lost):
    by = lost["by"]
    assert {n: r.status.value for n, r in by.items()} == {"squat": "ok", "victim": "ok", "bystander": "ok"}, lost["log"]
    runs = child_runs(lost["uri"], lost["outcome"].sweep_id)
    assert sorted(r.data.tags["farm.trial_id"] for r in runs) == sorted(lost["ids"].values())  # each once
    assert {r.data.tags["farm.status"] for r in runs} == {"ok"}
    assert all(r.data.tags["farm.previous_attempts"] for r in runs)  # every one needed a second attempt


def test_an_actor_killed_with_ray_kill_takes_its_engine_along(lost):
    kill = lost["incidents"].get("kill")
    assert kill, lost["log"]  # its engine ended (a hang fails the wait)
    assert not alive(kill["pid"]) and port_free(kill["port"])
    bystander = lost["by"]["bystander"]
    assert bystander.attempt >= 2 and ": node_lost: actor or node lost" in bystander.previous_attempts[0]
    assert bystander.engine_pid != kill["pid"]
    print(f"engine gone {kill['gone_s']:.1f} s after ray.kill")


def test_a_removed_node_loses_nothing_and_leaves_no_engine(lost):
    removal = lost["incidents"].get("remove")
    assert removal, lost["log"]  # its engine ended (a hang fails the wait)
    assert not alive(removal["pid"])
    victim = lost["by"]["victim"]
    assert victim.attempt >= 2 and victim.node_id != removal["node"]
    assert ": node_lost: " in victim.previous_attempts[0] and removal["node"][:12] in victim.previous_attempts[0]
    print(f"engine on the removed node gone {removal['gone_s']:.1f} s after remove_node")


def test_a_taken_port_is_retried_on_another_node(lost):
    squat = lost["by"]["squat"]
    # Retried on another node than its first start; that attempt may itself have been on the
    # removed node or its actor the one killed: then one more attempt finished the trial.
    assert squat.attempt >= 2 and ": port_in_use: " in squat.previous_attempts[0], squat.previous_attempts
    assert all(": node_lost: " in line for line in squat.previous_attempts[1:]), squat.previous_attempts
    first = squat.previous_attempts[0].split(" on node ")[1][:12]
    second = squat.previous_attempts[1] if len(squat.previous_attempts) > 1 else f"on node {squat.node_id}"
    # An attempt lost before its actor reported its node was waiting on the removed node.
    second_node = second.split("on node ")[1][:12] if "on node " in second else lost["incidents"]["remove"]["node"][:12]
    assert second_node != first, squat.previous_attempts
