"""The sweep driver: one Ray actor per trial, at most N in flight, retries only where they help.

Runs on the machine that calls `farm sweep` (local Ray started on demand) or inside a Ray job
on the cluster's head. Every finished trial is logged to MLflow by its actor before the driver
hears of it, so a driver that dies loses nothing: `--resume SWEEP_ID` runs only what is missing.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import ray
from ray.exceptions import RayActorError, RayError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.bench import BenchActor, TrackingUnavailable, TrialJob
from farm.run import estimate, metrics, passes, search
from farm.run.ray_names import actor_name, sweep_namespace
from farm.run.links import mlflow_run_link
from farm.analysis import accelerator, schedule, twins
from farm.analysis import plan as pass_plan
from farm.run.memory import unfit_trials
from farm.store import lease as sweep_lease, location, tracking
from farm.store.mlflow_store import MlflowStore
from farm.engines import get_engine
from farm.errors import UserError
from farm.run.jobs import client_runtime_env, connect_client, is_client_address, tag_sweep_with_submission
from farm.run.preflight import check_resume
from farm.run.events import SweepEvents
from farm.analysis.outcome import (TRANSIENT, Lost, lost_actor_detail, lost_actor_result, not_measurable_result,
                                   trial_not_measurable, should_retry)
from farm.analysis.quality_verdicts import quality_jobs
from farm.analysis.results import Status, TrialResult
from farm.secrets import redact_trial
from farm.study.spec import EngineSpec, Study
from farm.study.trial import NODE_MARK, Trial, node_control_id

# The driver process needs little; the actor's own CPU holds the guidellm client.
ACTOR_CPUS = 1


@dataclass
class SweepOutcome:
    sweep_id: str
    experiment_id: str
    results: list[TrialResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    interrupted: bool = False
    # The study as the sweep ran it: `accelerator_type: auto` resolved to the cluster's GPU model.
    study: Study | None = None
    # Halving: the trials pruned as not fitting (again, where the GPU model was known only once Ray was).
    pruned: dict[str, str] | None = None


def check_capacity(trials: list[Trial], engines: Mapping[str, EngineSpec] | None = None) -> None:
    """A trial that needs more GPUs than any node has (of its accelerator type, where the study
    names one) would wait forever: refuse it now."""
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    most = max((r.get("GPU", 0) for r in nodes), default=0)
    for t in trials:
        if t.gpus > most:
            raise UserError(f"trial {t.label} needs {t.gpus} GPU(s) on one node; the largest node has {int(most)}",
                            key=f"trials.{t.id}")
        accel = engines[t.engine].accelerator_type if engines and t.engine in engines and t.gpus else None
        if not accel:
            continue
        fit = [r for r in nodes if r.get(f"accelerator_type:{accel}")]
        if not fit:
            known = sorted({k.split(":", 1)[1] for r in nodes for k in r if k.startswith("accelerator_type:")})
            raise UserError(f"no node has GPUs of type {accel} (the cluster has: {', '.join(known) or 'none named'})",
                            key="accelerator_type")
        most_fit = max(r.get("GPU", 0) for r in fit)
        if t.gpus > most_fit:
            raise UserError(f"trial {t.label} needs {t.gpus} GPU(s) on one node; the largest {accel} node has "
                            f"{int(most_fit)}", key=f"trials.{t.id}")


def resolve_accelerator(study: Study, trials: list[Trial]) -> tuple[Study, str | None]:
    """The study with `accelerator_type: auto` replaced by the one GPU model of the cluster's alive
    nodes (farm/analysis/accelerator.py; several or none is a `UserError`), and that name; the study
    as it is (and None) when none of its GPU trials says auto."""
    if not accelerator.auto_engines(study, trials):
        return study, None
    name = accelerator.cluster_accelerator(n.get("Resources", {}) for n in ray.nodes() if n.get("Alive"))
    return accelerator.resolved(study, name), name


def _stored_models(tracking_uri: str, sweep_id: str, trials: list[Trial]) -> list[str]:
    """The GPU models the resumed sweep's stored study held its GPU trials to (its snapshot names
    the model `auto` resolved to); none where no study is stored or it names none."""
    try:
        stored = MlflowStore(tracking_uri).study(sweep_id)
    except UserError:  # a snapshot an older farm stored that this one cannot read: nothing to compare
        return []
    return accelerator.gpu_models(stored, trials) if stored is not None else []


def check_same_accelerator(tracking_uri: str, sweep_id: str, study: Study, trials: list[Trial], *,
                           from_cluster: bool) -> None:
    """A sweep's results are per GPU model: a resume on GPUs of another model than the sweep
    measured on is refused before any trial runs."""
    before, now = _stored_models(tracking_uri, sweep_id, trials), accelerator.gpu_models(study, trials)
    if before and now and before != now:
        where = "this cluster's GPUs are" if from_cluster else "this sweep asks for"
        raise UserError(f"sweep {sweep_id} measured on {', '.join(before)}; {where} {', '.join(now)}: results are "
                        f"per GPU model; start a new sweep (without --resume) on these GPUs, or resume it on "
                        f"{', '.join(before)} ones", key="--resume")


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
    pending = list(jobs)
    running: dict[ray.ObjectRef, _Running] = {}
    final: dict[str, TrialResult] = {}
    tried_nodes: dict[str, set[str]] = {}
    dispatcher = None
    if items is not None:
        known = ray.nodes()
        dispatcher = schedule.Dispatcher([dataclasses.replace(items[j.trial.id],
                                                              nodes=_allowed_nodes(j, (pins or {}).get(j.trial.id), known))
                                          for j in jobs])
    try:
        while pending or running:
            free = _free_gpus(running) if dispatcher is not None else {}
            while pending and len(running) < max_in_flight:
                if dispatcher is None:
                    job, chosen = pending.pop(0), None
                else:
                    picked = _next_job(dispatcher, pending, free, bool(running))
                    if picked is None:
                        break  # until GPUs free up (or a compile cache is written)
                    job, chosen = picked
                tracking.check_lease(job.sweep_id)  # a displaced driver starts nothing more (its beat may be 30 s off)
                if job.first_pass:
                    job = job.model_copy(update={"twins": twins.candidates(job.trial, [*finished_before, *final.values()])})
                secret = get_engine(job.trial.engine).secret_flags(job.engine_spec)
                options: dict = dict(name=actor_name(job.sweep_id, job.trial, job.attempt, secret),
                                     namespace=sweep_namespace(job.sweep_id),
                                     num_gpus=job.trial.gpus, num_cpus=ACTOR_CPUS, max_concurrency=3)
                if job.trial.gpus and job.engine_spec.accelerator_type:
                    options["accelerator_type"] = job.engine_spec.accelerator_type  # only nodes with that GPU model
                avoid = tried_nodes.get(job.trial.id, set())
                target = _other_node(avoid, job.trial.gpus) if avoid else None
                if chosen:  # the scheduler's node; soft: if that node is lost, anywhere else
                    target = chosen
                if target:
                    options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=target, soft=True)
                if (pins or {}).get(job.trial.id):  # a node control measures this node or nothing
                    options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=pins[job.trial.id], soft=False)
                actor = BenchActor.options(**options).remote(job.model_dump_json())
                running[actor.run.remote()] = _Running(job, actor, actor.node.remote(),
                                                       target=chosen)
                on_event("started", job, None)
            done, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
            for item in running.values():
                if item.node_id is None:
                    ready, _ = ray.wait([item.placed], timeout=0)
                    if ready:
                        try:
                            item.node_id = ray.get(item.placed)["node_id"]
                            on_event("placed", item.job, None)
                        except RayError:
                            item.node_id = ""
            for ref in done:
                item = running.pop(ref)
                job, actor = item.job, item.actor
                from_actor = True
                try:
                    result = TrialResult.model_validate_json(ray.get(ref))
                except RayError as exc:
                    result, from_actor = _result_without_actor(job, exc, item.node_id or None), False
                node = result.node_id or item.node_id
                if node:
                    tried_nodes.setdefault(job.trial.id, set()).add(node)
                if should_retry(result.status, job.attempt, max_retries):
                    ray.kill(actor, no_restart=True)
                    on_event("retry", job, result)
                    pending.append(job.model_copy(update={
                        "attempt": job.attempt + 1,
                        "previous_attempts": [*job.previous_attempts, _attempt_line(result)]}))
                    if dispatcher is not None:
                        dispatcher.add(dataclasses.replace(
                            items[job.trial.id], nodes=_allowed_nodes(job, (pins or {}).get(job.trial.id), ray.nodes()),
                            avoid=frozenset(tried_nodes.get(job.trial.id, ()))))
                    continue
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
                final[job.trial.id] = result
                on_event("finished", job, result)
    except BaseException:
        # Ctrl-C or a crash: stop every engine before leaving (the actors' watchdogs are the
        # second line of defence if this process is killed outright). A stopped trial ends as
        # `cancelled` and is not logged, so a resumed sweep runs it again.
        stops = [item.actor.stop.remote() for item in running.values()]
        try:
            ray.wait(stops, num_returns=len(stops), timeout=30)
            # Let a trial that had just finished store its result rather than be cut off mid-upload.
            ray.wait(list(running), num_returns=len(running), timeout=15)
        finally:
            for item in running.values():
                ray.kill(item.actor, no_restart=True)
        raise
    return [final[j.trial.id] for j in jobs if j.trial.id in final]


def run_sweep(plan, events: SweepEvents | None = None) -> SweepOutcome:
    """Run a sweep as planned (`plan`: farm/run/sweep_plan.py's `SweepPlan`; not imported here, not
    even for its type: that module runs the view, which runs this one, and farm's modules import one
    another without a cycle, tests/unit/farm/test_layers.py): every trial (`repeats`
    runs per profile, or 'auto'), the baseline once more on every node when there are several (node
    controls), then the later passes of `--repeats auto`; or the study's strategy (halving, a local
    search) with its budget and start. What happens is told to `events` (farm/run/events.py
    `SweepEvents`; none shown where it is None): each trial job's progress, the sweep's id, Ray's
    dashboard, where the scheduler's estimates come from (a scheduled grid only), the GPU model
    `accelerator_type: auto` resolved to, a resume waiting for another driver (`plan.wait_lease`
    seconds at most), each pass, rung or step planned. `plan.quality_job`: the quality gate's task as
    the preflight read it (farm/run/preflight.py's `check_sweep`); read here where not given.
    `plan.copies` (`--control`, a resume): trials the sweep measured, each run again first as a
    control on this resume's machine (`<id>@control<k>`, never ranked; selection counts its runs as
    its trial's there). The store defaults to `tracking.default_tracking_uri()`, the experiment to
    the grid's."""
    events = events if events is not None else SweepEvents()
    study, grid, trials, resume, repeats = plan.study, plan.grid, plan.trials, plan.resume, plan.repeats
    tracking_uri = plan.tracking_uri or tracking.default_tracking_uri()
    experiment = plan.experiment or study.grid_experiment(grid)
    address, workdir, command, only, copies = plan.address, plan.workdir, plan.command, plan.only, plan.copies
    strategy, budget_gpu_hours, pruned, start = plan.strategy, plan.budget_gpu_hours, plan.pruned, plan.start
    on_event = events.on_trial

    # One driver a sweep (farm/store/lease.py): a resume takes the sweep's lease (or is refused in
    # one line) before it reads which trials finished, so that no trial runs twice.
    took = sweep_lease.take(tracking_uri, resume, wait_s=plan.wait_lease, on_wait=events.on_lease) if resume else False
    try:
        # An unknown or foreign sweep id is a user error: found before Ray starts.
        point = check_resume(tracking_uri, resume, study, grid, trials) if resume else None
        copy_trials = _control_copies(tracking_uri, point, trials, copies) if copies else []
    except BaseException:
        if took:  # a lease this process held before (its earlier run of the sweep) stays held
            sweep_lease.release(tracking_uri, resume)
        raise
    # Stepwise studies keep their order; a grid of GPU trials is scheduled (farm/analysis/schedule.py),
    # at what the study's earlier sweep (or this one, resumed) measured: read before this sweep's
    # own parent run exists, which would otherwise be the study's latest.
    # the strategies this sweep runs, in order (farm/run/search.py): the grid's first pass, then
    # --repeats auto's passes; or halving, or the local search
    chain = search.chain(strategy, pass_plan.is_auto(repeats))
    scheduled = chain[0].schedules and not study.grids[grid].ordered and all(
        t.gpus for t in trials if only is None or t.id in only)
    measured, estimates = estimate.schedule_durations(tracking_uri, study, resume) if scheduled else (None, None)
    # A search that prices its steps does so at what the study's earlier sweep (or this one) measured.
    search_durations = (estimate.schedule_durations(tracking_uri, study, resume)[0]
                        if any(c.prices_steps for c in chain) else None)
    # A resumed grid sweep whose every trial finished has nothing to run: it answers from the store
    # (its report again, the sweep marked finished) without starting or joining Ray.
    nothing_left = (point is not None and all(c.once for c in chain) and not copy_trials
                    and all(t.id in point.finished for t in trials if only is None or t.id in only))
    started_ray = False
    if not ray.is_initialized() and not nothing_left:
        if is_client_address(address):
            with tempfile.TemporaryDirectory(prefix="farm-client-") as tmp:  # uploaded by ray.init
                env = client_runtime_env(Path(tmp))
                ctx = connect_client(lambda: ray.init(address=address, log_to_driver=False, runtime_env=env),
                                     address)
        elif address:
            ctx = ray.init(address=address, log_to_driver=False)
        else:
            ctx = ray.init(address="local", log_to_driver=False)  # never join a cluster `ray start` left running here
            started_ray = True
        events.on_ray(getattr(ctx, "dashboard_url", None), started_ray)  # a Ray Client context may have none
    sweep_id: str | None = None
    heartbeat: tracking.Heartbeat | None = None
    # SIGTERM (a `kill`, Ray's job stop, a scheduler's preemption) ends the sweep as Ctrl-C does:
    # engines stopped, the sweep marked killed, the resume command printed
    old_term = _term_as_interrupt()
    try:
        if not nothing_left:
            # `accelerator_type: auto`: the cluster's one GPU model, before anything is placed or
            # stored, so the sweep's study snapshot names the model its results were measured on.
            study, name = resolve_accelerator(study, trials)
            if name is not None:
                events.on_accelerator(f"accelerator: {name} (from the cluster)")
                if any(c.prunes_unfit for c in chain):  # the memory fit needs the GPU model
                    pruned = {**(pruned or {}), **unfit_trials(study, trials)}
            if point is not None:
                check_same_accelerator(tracking_uri, point.sweep_id, study, trials, from_cluster=name is not None)
            check_capacity(trials, study.engines)
        elif point is not None and accelerator.auto_engines(study, trials):
            # nothing runs: the report is per the GPU model the sweep measured on, as stored
            models = _stored_models(tracking_uri, point.sweep_id, trials)
            if len(models) == 1:
                study = accelerator.resolved(study, models[0])
        if point is not None:
            sweep_id, exp_id, done = point.sweep_id, point.experiment_id, point.finished
            # Runs of trials that will run again (cut off, lost, cancelled) go, so that each
            # trial id appears once among the sweep's child runs.
            # A store brought from another machine: what this sweep writes next goes beside the
            # database, where its earlier runs' artifacts now lie (farm/store/location.py).
            location.relocate(tracking_uri)
            tracking.drop_unfinished_runs(tracking_uri, sweep_id)
            tracking.reopen_sweep(tracking_uri, sweep_id)
            tracking.keep_reference(tracking_uri, sweep_id, study)
            tracking.keep_trials_view(tracking_uri, exp_id, sweep_id, study.grid_profiles(grid),
                                      study.grid_primary_profile(grid))
        else:
            # the lease in the run's creation: no moment in which the sweep exists without its driver
            token, claim = sweep_lease.new_claim()
            exp_id, sweep_id = tracking.start_sweep(tracking_uri, experiment, study, grid, trials,
                                                    command=command, repeats=repeats, claim=claim)
            sweep_lease.hold(tracking_uri, sweep_id, token)
            done = set()
        # where the driver runs and its heartbeat: a driver killed outright leaves its sweep
        # "running", which the next command that reads it marks interrupted (tracking.interruption)
        heartbeat = tracking.Heartbeat(tracking_uri, sweep_id, lease=sweep_lease)
        events.on_sweep(sweep_id)
        if estimates:
            events.on_schedule(estimates)
        shared_cache = None if nothing_left else _compile_cache(study, sweep_id)
        # inside a Ray job: which job runs this sweep, and the sweep's MLflow link in the job's metadata
        tag_sweep_with_submission(tracking_uri, sweep_id, mlflow_run_link(tracking_uri, exp_id, sweep_id))
        outcome = SweepOutcome(sweep_id=sweep_id, experiment_id=exp_id, study=study, pruned=pruned)
        # `only`: this call runs part of the sweep; the grid's other trials stay pending.
        todo = [t for t in trials if t.id not in done and (only is None or t.id in only)]
        todo = copy_trials + todo  # the controls first: each then shares its machine with all the rest
        todo = _unmeasurable(study, todo, primary=study.grid_primary_profile(grid), sweep_id=sweep_id, exp_id=exp_id,
                             tracking_uri=tracking_uri, on_event=on_event)
        outcome.skipped = [t.id for t in trials if t.id in done and (only is None or t.id in only)]
        # The baseline once more on each node able to run trials, pinned there (farm/analysis/plan.py).
        controls = [] if nothing_left else [
            (t, node) for t, node in passes.node_controls(study, trials, ACTOR_CPUS)
            if t.id not in done and (only is None or t.node_control_of in only)]

        # trial id -> its quality job (issue 49), from the task the preflight read
        gate = {} if nothing_left else quality_jobs(study, trials, plan.quality_job)

        def make_job(t: Trial, n: int, pass_index: int = 1) -> TrialJob:
            # A later pass of --repeats auto gets its own directory and run order, and is appended
            # to its trial's child run by the driver (farm/run/passes.py), not logged by its actor.
            later = pass_index > 1
            return TrialJob(sweep_id=sweep_id, trial=t, engine_spec=study.engines[t.engine],
                            profiles={p: study.profiles[p] for p in t.profiles if p in study.profiles}, repeats=n,
                            min_success_rate=study.min_success_rate,
                            workdir=str(workdir / f"pass-{pass_index}" if later else workdir), order_seed=pass_index - 1,
                            first_pass=not later,
                            tracking_uri=None if later else tracking_uri, experiment_id=exp_id,
                            parent_run_id=None if later else sweep_id, compile_cache=shared_cache,
                            client_hosts=hosts,
                            # the quality gate (issue 49): a first start answers its items, if it is to
                            quality=None if later else gate.get(t.id))

        hosts = None if nothing_left else _client_hosts(sweep_id, todo + [t for t, _ in controls], study)
        max_in_flight = study.grids[grid].max_concurrent_trials or study.max_concurrent_trials
        # farm's metrics on Ray's Prometheus endpoint, for the dashboard's charts (farm/run/metrics.py)
        if not nothing_left:
            on_event = metrics.watch(on_event, sweep_id, len(todo) + len(controls))

        def log_lost(result: TrialResult) -> None:
            tracking.log_trial(tracking_uri, exp_id, sweep_id, result, None)

        def pass_event(kind: str, job: TrialJob, result: TrialResult | None) -> None:
            # A later pass's trial finishing is not one more trial of the sweep.
            on_event("pass_finished" if kind == "finished" else kind, job, result)

        # which jobs are a trial's first (one more trial of the sweep) and which run it again (a pass)
        stored = tracking.load_results(tracking_uri, sweep_id)  # read once: here and for the grid's first pass
        fresh = search.first_appearance(stored)
        # what the grid's first pass is built from (farm/run/grid_pass.py builds it)
        ctx = search.SearchContext(study=study, grid=grid, trials=trials, tracking_uri=tracking_uri,
                                   experiment_id=exp_id, sweep_id=sweep_id, make_job=make_job,
                                   budget_gpu_hours=budget_gpu_hours, pruned=pruned, start=start,
                                   measured=search_durations, todo=todo, controls=controls,
                                   first_repeats=pass_plan.first_pass_repeats(repeats), schedule_at=measured,
                                   scheduled=scheduled, stored=stored, resumed=point is not None)
        announce = {"pass": events.on_pass, "rung": events.on_rung}

        try:
            for kind in chain:  # each planned round by round from what MLflow holds (farm/run/search.py)
                search.run_search(search.strategy_for(kind.name, ctx), ctx,
                                  on_plan=announce.get(kind.announces or "", lambda p: None),
                                  run_jobs=lambda js, on_result, **options: _run_round(
                                      js, on_result, fresh=fresh, on_event=on_event, pass_event=pass_event,
                                      log_lost=log_lost, max_in_flight=max_in_flight, max_retries=study.max_retries,
                                      **options))
        except KeyboardInterrupt:
            outcome.interrupted = True
            tracking.finish_sweep(tracking_uri, sweep_id, "killed")
        outcome.results = tracking.load_results(tracking_uri, sweep_id)
        heartbeat = None  # beats on while the report is made; `tracking.finish_sweep` ends it
        return outcome
    finally:
        if heartbeat is not None:  # an error: nothing will finish the sweep (its lease let go)
            heartbeat.stop()
        sweep_lease.release_unless_beating(tracking_uri, sweep_id or resume)  # taken, the sweep not begun
        _restore_term(old_term)
        _REGISTRIES.pop(sweep_id or "", None)
        _end_client_hosts(sweep_id or "")
        if started_ray:
            ray.shutdown()


def _control_copies(tracking_uri: str, point, trials: list[Trial], copies: Sequence[str]) -> list[Trial]:
    """`--control`: a copy of each trial named, to run first on this resume's machine. Each must have
    measured in the sweep (one line and exit 2, before anything starts, where one has not). The k-th
    copy of a trial is `<id>@control<k>`: each resume's copies are trials of their own."""
    if point is None:
        raise UserError("only with --resume", key="--control")
    stored = tracking.load_results(tracking_uri, point.sweep_id)
    measured = {r.trial.id for r in stored if r.status == Status.ok}
    by_id = {t.id: t for t in trials}
    out = []
    for i, tid in enumerate(copies):
        if tid not in measured:
            raise UserError(f"trial {by_id[tid].label} has not measured in sweep {point.sweep_id}, so there is "
                            f"nothing to repeat; run it with --trial", key="--control")
        k = 1 + sum(1 for r in stored if r.trial.node_control_of == tid and f"{NODE_MARK}control" in r.trial.id)
        t = by_id[tid]
        out.append(t.model_copy(update={"id": node_control_id(tid, f"control{k}"), "name": f"{t.label}{NODE_MARK}control{k}",
                                        "node_control_of": tid, "index": max(x.index for x in trials) + 1 + i}))
    return out


def _term_as_interrupt():
    """SIGTERM raised as KeyboardInterrupt in the main thread (where Python delivers signals);
    returns the handler it replaced, or None where none was installed (not the main thread)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)


def _restore_term(old) -> None:
    if old is not None:
        import signal

        signal.signal(signal.SIGTERM, old)



def _compile_cache(study: Study, sweep_id: str) -> str | None:
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


def _client_hosts(sweep_id: str, trials: list[Trial], study: Study) -> str | None:
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


def _end_client_hosts(sweep_id: str) -> None:
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


def _unmeasurable(study: Study, todo: list[Trial], *, primary: str, sweep_id: str, exp_id: str, tracking_uri: str,
                  on_event: Callable[[str, TrialJob, TrialResult | None], None]) -> list[Trial]:
    """What is left to start once the trials whose numbers would mean nothing are recorded as such
    (speculative decoding on dummy weights), or cut to one run of the primary profile when the
    study asks for their speed alone (`dummy_output_dependent: speed`)."""
    out = []
    for t in todo:
        engine = get_engine(t.engine)
        reason = trial_not_measurable(t)
        if reason is None:
            out.append(t)
        elif study.dummy_output_dependent == "speed":
            out.append(t.model_copy(update={"profiles": [primary], "profile_repeats": {}}))
        else:
            result = not_measurable_result(sweep_id=sweep_id, reason=reason,
                                           trial=redact_trial(t, engine.secret_flags(study.engines[t.engine])))
            tracking.log_trial(tracking_uri, exp_id, sweep_id, result, None)
            on_event("finished", TrialJob(sweep_id=sweep_id, trial=t, engine_spec=study.engines[t.engine], profiles={},
                                          repeats=1, min_success_rate=study.min_success_rate, workdir=""), result)
    return out


def _run_round(jobs: list[TrialJob], on_result: Callable[[TrialResult], None], *,
               fresh: Callable[..., bool], on_event, pass_event, log_lost, max_in_flight: int,
               max_retries: int, **options) -> list[TrialResult]:
    """One round of a search (farm/run/search.py): its jobs as actors, each final result stored
    (`on_result`) before its end is told. A trial's first job counts as one more trial of the sweep,
    a job running it again as one more pass (`fresh`); a job that logs itself and lost its actor is
    logged as lost, one the runner stores is left to the runner."""
    self_logging = {j.trial.id for j in jobs if j.tracking_uri}

    def event(kind: str, job: TrialJob, result: TrialResult | None) -> None:
        first = fresh(job, kind == "finished")
        if kind == "finished":
            on_result(result)
        (on_event if first else pass_event)(kind, job, result)

    return run_trials(jobs, max_in_flight=max_in_flight, max_retries=max_retries, on_event=event,
                      log_lost=lambda r: log_lost(r) if r.trial.id in self_logging else None, **options)
