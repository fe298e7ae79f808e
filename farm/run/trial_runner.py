"""`run_trials`: a sweep's trial jobs, one Ray actor each, at most N in flight, placed by the
scheduler (or Ray), retried only where it helps (farm/run/driver.py runs a sweep through it)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import ray
from ray.exceptions import RayActorError, RayError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.bench import BenchActor, TrackingUnavailable, TrialJob
from farm.analysis import schedule, twins
from farm.analysis.outcome import TRANSIENT, Lost, lost_actor_detail, lost_actor_result, should_retry
from farm.analysis.results import TrialResult
from farm.engines import get_engine
from farm.run.ray_names import actor_name, sweep_namespace
from farm.secrets import redact_trial
from farm.store import tracking

# The driver process needs little; the actor's own CPU holds the guidellm client.
ACTOR_CPUS = 1


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def _result_without_actor(job: TrialJob, exc: BaseException, node_id: str | None) -> TrialResult:
    """The result of a trial whose actor gave none back: which Ray error it was decides which
    loss (farm.analysis.outcome.Lost) it is; outcome says what that loss means."""
    cause = exc.cause if isinstance(exc, RayTaskError) else None
    if isinstance(exc, RayActorError) or not isinstance(exc, RayTaskError):
        lost, detail = Lost.actor, lost_actor_detail(type(exc).__name__, str(exc))
    elif isinstance(cause, TrackingUnavailable):
        lost, detail = Lost.not_stored, str(cause)
    else:
        lost, detail = Lost.farm, f"{type(cause or exc).__name__}: {_first_line(cause or exc)}"
    trial = redact_trial(job.trial, get_engine(job.trial.engine).secret_flags(job.engine_spec))
    return lost_actor_result(sweep_id=job.sweep_id, trial=trial, attempt=job.attempt,
                             previous_attempts=job.previous_attempts, node_id=node_id, lost=lost, detail=detail)


def _other_node(avoid: set[str], gpus: int) -> str | None:
    """An alive node not in `avoid` that could hold a trial needing `gpus` GPUs (and one CPU)."""
    for node in ray.nodes():
        res = node.get("Resources", {})
        if (node.get("Alive") and node["NodeID"] not in avoid and res.get("GPU", 0) >= gpus
                and res.get("CPU", 0) >= ACTOR_CPUS):
            return node["NodeID"]
    return None


def _attempt_line(result: TrialResult) -> str:
    where = f" on node {result.node_id[:12]}" if result.node_id else ""
    return f"attempt {result.attempt}{where}: {result.status.value}: {result.reason or ''}"[:1000]


@dataclass
class _Running:
    job: TrialJob
    actor: "ray.actor.ActorHandle"
    placed: "ray.ObjectRef"  # resolves to the actor's node (kept to know where a lost actor was)
    node_id: str | None = None
    target: str | None = None  # the node the scheduler chose


def _free_gpus(running: Mapping[object, _Running]) -> dict[str, int]:
    """Alive nodes able to hold a trial actor -> GPUs not held by this sweep's running trials."""
    free = {n["NodeID"]: int(n["Resources"].get("GPU", 0)) for n in ray.nodes()
            if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= ACTOR_CPUS}
    for item in running.values():
        node = item.target or item.node_id
        if node in free:
            free[node] -= item.job.trial.gpus
    return free


def _allowed_nodes(job: TrialJob, pin: str | None, nodes: list[dict]) -> frozenset[str] | None:
    if pin:
        return frozenset({pin})
    accel = job.engine_spec.accelerator_type if job.trial.gpus else None
    if not accel:
        return None
    return frozenset(n["NodeID"] for n in nodes if n.get("Resources", {}).get(f"accelerator_type:{accel}"))


def _next_job(dispatcher: schedule.Dispatcher, pending: list[TrialJob], free: dict[str, int],
              busy: bool) -> tuple[TrialJob, str | None] | None:
    """The next job and its node as the scheduler picks them (taken off `pending`, its GPUs off
    `free`); None to wait for GPUs. With nothing running and nothing fitting where GPUs look
    free (a node lost), the plan's next job goes to Ray to place (node None)."""
    picked = dispatcher.next(free, time.monotonic())
    if picked is None and busy:
        return None
    item, node = picked or (dispatcher.pending.pop(0), None)
    job = next(j for j in pending if j.trial.id == item.id)
    pending.remove(job)
    if node:
        free[node] -= job.trial.gpus
        dispatcher.started(item, node, time.monotonic())
    return job, node



@dataclass
class _Pool:
    """What one `run_trials` call keeps track of: the jobs not started yet, the actors running (by
    their result's ref), each trial's final result, the nodes each trial was tried on, and the
    scheduler (None: jobs start in their order and Ray places them)."""
    pending: list[TrialJob]
    pins: Mapping[str, str]
    items: Mapping[str, schedule.Item] | None
    on_event: Callable[[str, TrialJob, TrialResult | None], None]
    dispatcher: schedule.Dispatcher | None = None
    running: dict = field(default_factory=dict)  # ray.ObjectRef -> _Running
    final: dict[str, TrialResult] = field(default_factory=dict)
    tried_nodes: dict[str, set[str]] = field(default_factory=dict)


def run_trials(jobs: list[TrialJob], *, max_in_flight: int, max_retries: int,
               on_event: Callable[[str, TrialJob, TrialResult | None], None] = lambda *a: None,
               log_lost: Callable[[TrialResult], None] = lambda r: None,
               pins: Mapping[str, str] | None = None,
               items: Mapping[str, schedule.Item] | None = None,
               finished_before: Sequence[TrialResult] = ()) -> list[TrialResult]:
    """Run every job as an actor; returns one final result per trial, in job order.

    `pins` (trial id -> Ray node id) holds a trial to one node (the baseline's node controls).
    `items` (trial id -> its estimate and compile group): farm.analysis.schedule picks which job
    starts next and on which node (node affinity); without them, jobs start in their order and
    Ray places them.

    `finished_before`: the sweep's trials finished before this call. Each first-pass job starts with the
    finished trials (those and this call's) it could turn out to run the same server as
    (farm/analysis/twins.py).

    Retries only transient failures (`outcome.should_retry`), up to `max_retries` times, each on
    another node than the attempts before where one can take it (soft: if none can, anywhere).
    A final result is in MLflow when this hears of it: logged by the actor, or here when the
    actor is gone (`log_lost`).
    """
    pool = _Pool(pending=list(jobs), pins=pins or {}, items=items, on_event=on_event)
    if items is not None:
        known = ray.nodes()
        pool.dispatcher = schedule.Dispatcher([dataclasses.replace(items[j.trial.id],
                                                                   nodes=_allowed_nodes(j, pool.pins.get(j.trial.id), known))
                                               for j in jobs])
    try:
        while pool.pending or pool.running:
            _start_jobs(pool, max_in_flight, finished_before)
            done, _ = ray.wait(list(pool.running), num_returns=1, timeout=1.0)
            _note_placements(pool)
            for ref in done:
                _finish(pool, ref, max_retries, log_lost)
    except BaseException:
        _stop_all(pool.running)
        raise
    return [pool.final[j.trial.id] for j in jobs if j.trial.id in pool.final]


def _start_jobs(pool: _Pool, max_in_flight: int, finished_before: Sequence[TrialResult]) -> None:
    """Start jobs while fewer than `max_in_flight` run: the next in order, or the scheduler's pick
    on its node (none while the GPUs it needs are busy)."""
    free = _free_gpus(pool.running) if pool.dispatcher is not None else {}
    while pool.pending and len(pool.running) < max_in_flight:
        if pool.dispatcher is None:
            job, chosen = pool.pending.pop(0), None
        else:
            picked = _next_job(pool.dispatcher, pool.pending, free, bool(pool.running))
            if picked is None:
                break  # until GPUs free up (or a compile cache is written)
            job, chosen = picked
        tracking.check_lease(job.sweep_id)  # a displaced driver starts nothing more (its beat may be 30 s off)
        if job.first_pass:
            job = job.model_copy(update={"twins": twins.candidates(job.trial, [*finished_before, *pool.final.values()])})
        actor = BenchActor.options(**_actor_options(job, chosen, pool)).remote(job.model_dump_json())
        pool.running[actor.run.remote()] = _Running(job, actor, actor.node.remote(),
                                                    target=chosen)
        pool.on_event("started", job, None)


def _actor_options(job: TrialJob, chosen: str | None, pool: _Pool) -> dict:
    """The job's actor's Ray options: its name, GPUs and CPU, its GPU model, and where it goes (the
    scheduler's node, else another node than its attempts before; a node control's own node)."""
    secret = get_engine(job.trial.engine).secret_flags(job.engine_spec)
    options: dict = dict(name=actor_name(job.sweep_id, job.trial, job.attempt, secret),
                         namespace=sweep_namespace(job.sweep_id),
                         num_gpus=job.trial.gpus, num_cpus=ACTOR_CPUS, max_concurrency=3)
    if job.trial.gpus and job.engine_spec.accelerator_type:
        options["accelerator_type"] = job.engine_spec.accelerator_type  # only nodes with that GPU model
    avoid = pool.tried_nodes.get(job.trial.id, set())
    target = _other_node(avoid, job.trial.gpus) if avoid else None
    if chosen:  # the scheduler's node; soft: if that node is lost, anywhere else
        target = chosen
    if target:
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=target, soft=True)
    if pool.pins.get(job.trial.id):  # a node control measures this node or nothing
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=pool.pins[job.trial.id], soft=False)
    return options


def _note_placements(pool: _Pool) -> None:
    """Each running actor's node, once Ray has placed it (told as `placed`)."""
    for item in pool.running.values():
        if item.node_id is None:
            ready, _ = ray.wait([item.placed], timeout=0)
            if ready:
                try:
                    item.node_id = ray.get(item.placed)["node_id"]
                    pool.on_event("placed", item.job, None)
                except RayError:
                    item.node_id = ""


def _finish(pool: _Pool, ref: ray.ObjectRef, max_retries: int, log_lost: Callable[[TrialResult], None]) -> None:
    """A job whose actor answered (or was lost): retried, or its trial's final result kept and told."""
    item = pool.running.pop(ref)
    job, actor = item.job, item.actor
    from_actor = True
    try:
        result = TrialResult.model_validate_json(ray.get(ref))
    except RayError as exc:
        result, from_actor = _result_without_actor(job, exc, item.node_id or None), False
    node = result.node_id or item.node_id
    if node:
        pool.tried_nodes.setdefault(job.trial.id, set()).add(node)
    if should_retry(result.status, job.attempt, max_retries):
        _retry(pool, job, actor, result)
        return
    try:
        if result.status in TRANSIENT and from_actor:
            # Out of retries: the actor kept this one back; it is the last word now.
            try:
                ray.get(actor.record.remote())
            except RayError:  # the actor could not store it: the loss is still shown
                log_lost(result)
        elif not from_actor:
            # The actor died before it could log; the sweep must still show the loss.
            log_lost(result)
    finally:
        ray.kill(actor, no_restart=True)
    pool.final[job.trial.id] = result
    pool.on_event("finished", job, result)


def _retry(pool: _Pool, job: TrialJob, actor: "ray.actor.ActorHandle", result: TrialResult) -> None:
    """The job again, as its next attempt (the scheduler told to avoid the nodes it was tried on)."""
    ray.kill(actor, no_restart=True)
    pool.on_event("retry", job, result)
    pool.pending.append(job.model_copy(update={
        "attempt": job.attempt + 1,
        "previous_attempts": [*job.previous_attempts, _attempt_line(result)]}))
    if pool.dispatcher is not None:
        pool.dispatcher.add(dataclasses.replace(
            pool.items[job.trial.id], nodes=_allowed_nodes(job, pool.pins.get(job.trial.id), ray.nodes()),
            avoid=frozenset(pool.tried_nodes.get(job.trial.id, ()))))


def _stop_all(running: Mapping[object, _Running]) -> None:
    """Ctrl-C or a crash: stop every engine before leaving (the actors' watchdogs are the second
    line of defence if this process is killed outright). A stopped trial ends as `cancelled` and
    is not logged, so a resumed sweep runs it again."""
    stops = [item.actor.stop.remote() for item in running.values()]
    try:
        ray.wait(stops, num_returns=len(stops), timeout=30)
        # Let a trial that had just finished store its result rather than be cut off mid-upload.
        ray.wait(list(running), num_returns=len(running), timeout=15)
    finally:
        for item in running.values():
            ray.kill(item.actor, no_restart=True)
