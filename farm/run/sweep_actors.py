"""The actors a sweep shares beside its trials' own, started by the driver (farm/run/driver.py) in
the sweep's namespace and ended with it: the compile caches' registry and each node's guidellm
client host."""

from __future__ import annotations

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from farm.run.ray_names import sweep_namespace
from farm.run.trial_runner import ACTOR_CPUS
from farm.study.spec import Study
from farm.study.trial import Trial


def compile_cache(study: Study, sweep_id: str) -> str | None:
    """Where the sweep's trials share compile caches (actors/compile_cache.py): the study's
    directory, or, on a cluster of several nodes, the sweep's registry actor in Ray's object
    store (started here, in the sweep's namespace, ended with the driver); None on one node,
    whose own cache is all there is."""
    if study.compile_cache and study.compile_cache != "ray":
        return study.compile_cache
    alive = [n for n in ray.nodes() if n.get("Alive")]
    if study.compile_cache != "ray" and len(alive) <= 1:
        return None
    from actors.compile_cache import REGISTRY_NAME, CacheRegistry

    namespace = sweep_namespace(sweep_id)
    registry = ray.remote(CacheRegistry).options(name=REGISTRY_NAME, namespace=namespace, num_cpus=0,
                                                 get_if_exists=True).remote()
    ray.get(registry.keys.remote())  # up and named before the first trial looks for it
    # Held while the driver runs: Ray ends an actor no handle refers to, named or not.
    _REGISTRIES[sweep_id] = registry
    return f"ray:{namespace}"


_REGISTRIES: dict[str, object] = {}


def end_compile_cache(sweep_id: str) -> None:
    """The sweep's registry let go (Ray ends it once no handle refers to it)."""
    _REGISTRIES.pop(sweep_id, None)


def client_hosts(sweep_id: str, trials: list[Trial], study: Study) -> str | None:
    """A guidellm client host on each node able to run one of `trials` (actors/client_host.py), in
    the sweep's namespace: each trial's client is forked from its node's host, so guidellm is
    imported once a node, not once a trial (about 4.5 s of CPU; on 2 cores it delayed a trial's
    first run). Not waited for here: a trial waits for its node's host when it needs its client."""
    if not trials:
        return None
    from actors.client_host import ClientHost, host_name

    namespace = sweep_namespace(sweep_id)
    gpus = min(t.gpus for t in trials)
    # GPU trials held to a GPU model (`accelerator_type`) run only on nodes of that model
    models = {study.engines[t.engine].accelerator_type if t.gpus else None for t in trials}

    def runs_trials(node: dict) -> bool:
        res = node.get("Resources", {})
        return (node.get("Alive", False) and res.get("CPU", 0) >= ACTOR_CPUS and res.get("GPU", 0) >= gpus
                and (None in models or any(res.get(f"accelerator_type:{m}") for m in models)))

    _HOSTS[sweep_id] = [
        ray.remote(ClientHost).options(
            name=host_name(n["NodeID"]), namespace=namespace, num_cpus=0, get_if_exists=True,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)).remote()
        for n in ray.nodes() if runs_trials(n)]
    return namespace


def end_client_hosts(sweep_id: str) -> None:
    """Each host stops its process, then its actor goes (the trials' clients are their trials' to
    stop); a host's watchdog stops a process whose actor went first."""
    hosts = _HOSTS.pop(sweep_id, [])
    if not hosts:
        return
    try:
        ray.wait([host.stop.remote() for host in hosts], num_returns=len(hosts), timeout=15)
    except Exception:  # noqa: BLE001 - a node lost, or Ray shut down: its host went with it
        pass
    for host in hosts:
        try:
            ray.kill(host, no_restart=True)
        except Exception:  # noqa: BLE001 - as above
            pass


_HOSTS: dict[str, list] = {}

