"""The sweep driver: one Ray actor per trial, at most N in flight, retries only where they help.

Runs on the machine that calls `farm sweep` (local Ray started on demand) or inside a Ray job
on the cluster's head. Every finished trial is logged to MLflow by its actor before the driver
hears of it, so a driver that dies loses nothing: `--resume SWEEP_ID` runs only what is missing.
The trials' actors run in farm/run/trial_runner.py (`run_trials`, importable from here too); the
actors the sweep shares beside them in farm/run/sweep_actors.py.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import ray

from actors.bench import TrialJob
from farm.run import estimate, metrics, passes, search
from farm.run.links import mlflow_run_link
from farm.analysis import accelerator
from farm.analysis import plan as pass_plan
from farm.run.memory import unfit_trials
from farm.store import lease as sweep_lease, location, tracking
from farm.store.mlflow_store import MlflowStore
from farm.engines import get_engine
from farm.errors import UserError
from farm.run.jobs import client_runtime_env, connect_client, is_client_address, tag_sweep_with_submission
from farm.run.preflight import check_resume
from farm.run.events import SweepEvents
from farm.run.sweep_actors import client_hosts as _client_hosts, compile_cache as _compile_cache
from farm.run.sweep_actors import end_client_hosts, end_compile_cache
# run_trials and _result_without_actor are imported from here (bench/makespan.py, tests)
from farm.run.trial_runner import ACTOR_CPUS, _result_without_actor, run_trials  # noqa: F401
from farm.analysis.outcome import not_measurable_result, trial_not_measurable
from farm.analysis.quality_verdicts import quality_jobs
from farm.analysis.results import Status, TrialResult
from farm.secrets import redact_trial
from farm.study.spec import EngineSpec, Study
from farm.study.trial import NODE_MARK, Trial, node_control_id


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
    only, pruned = plan.only, plan.pruned
    point, copy_trials = _take_resume(plan, tracking_uri, events)
    # Stepwise studies keep their order; a grid of GPU trials is scheduled (farm/analysis/schedule.py),
    # at what the study's earlier sweep (or this one, resumed) measured: read before this sweep's
    # own parent run exists, which would otherwise be the study's latest.
    # the strategies this sweep runs, in order (farm/run/search.py): the grid's first pass, then
    # --repeats auto's passes; or halving, or the local search
    chain = search.chain(plan.strategy, pass_plan.is_auto(repeats))
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
        started_ray = _start_ray(plan.address, events)
    sweep_id: str | None = None
    heartbeat: tracking.Heartbeat | None = None
    # SIGTERM (a `kill`, Ray's job stop, a scheduler's preemption) ends the sweep as Ctrl-C does:
    # engines stopped, the sweep marked killed, the resume command printed
    old_term = _term_as_interrupt()
    try:
        study, pruned = _gpu_model(study, trials, chain, pruned, point, tracking_uri, events, nothing_left=nothing_left)
        if point is not None:
            sweep_id, exp_id, done = point.sweep_id, point.experiment_id, point.finished
            _reopen(tracking_uri, sweep_id, exp_id, study, grid)
        else:
            # the lease in the run's creation: no moment in which the sweep exists without its driver
            token, claim = sweep_lease.new_claim()
            exp_id, sweep_id = tracking.start_sweep(tracking_uri, experiment, study, grid, trials,
                                                    command=plan.command, repeats=repeats, claim=claim)
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
        todo, controls = _left_to_run(plan, events, outcome, done, copy_trials, study=study, tracking_uri=tracking_uri,
                                      nothing_left=nothing_left)
        _run_chain(plan, events, chain, outcome, study=study, tracking_uri=tracking_uri, todo=todo,
                   controls=controls, shared_cache=shared_cache, nothing_left=nothing_left,
                   search_durations=search_durations, measured=measured, scheduled=scheduled,
                   resumed=point is not None)
        outcome.results = tracking.load_results(tracking_uri, sweep_id)
        heartbeat = None  # beats on while the report is made; `tracking.finish_sweep` ends it
        return outcome
    finally:
        _let_go(tracking_uri, sweep_id, resume, heartbeat=heartbeat, old_term=old_term, started_ray=started_ray)


def _take_resume(plan, tracking_uri: str, events: SweepEvents) -> tuple[object | None, list[Trial]]:
    """A resume's point (farm/run/preflight.py `check_resume`) and its `--control` copies; None and
    none for a new sweep. One driver a sweep (farm/store/lease.py): a resume takes the sweep's lease
    (or is refused in one line) before it reads which trials finished, so that no trial runs twice."""
    resume = plan.resume
    took = sweep_lease.take(tracking_uri, resume, wait_s=plan.wait_lease, on_wait=events.on_lease) if resume else False
    try:
        # An unknown or foreign sweep id is a user error: found before Ray starts.
        point = check_resume(tracking_uri, resume, plan.study, plan.grid, plan.trials) if resume else None
        copy_trials = _control_copies(tracking_uri, point, plan.trials, plan.copies) if plan.copies else []
    except BaseException:
        if took:  # a lease this process held before (its earlier run of the sweep) stays held
            sweep_lease.release(tracking_uri, resume)
        raise
    return point, copy_trials


def _start_ray(address: str | None, events: SweepEvents) -> bool:
    """Ray joined at `address` (a Ray Client one with the project uploaded), or a local Ray started
    for this sweep (True: it goes with the sweep); its dashboard told to `events`."""
    started_ray = False
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
    return started_ray


def _gpu_model(study: Study, trials: list[Trial], chain, pruned: dict[str, str] | None, point,
               tracking_uri: str, events: SweepEvents, *, nothing_left: bool) -> tuple[Study, dict[str, str] | None]:
    """`accelerator_type: auto`: the cluster's one GPU model, before anything is placed or stored,
    so the sweep's study snapshot names the model its results were measured on (and the trials a
    strategy prunes as not fitting it, added to `pruned`). A resume on another model than the sweep
    measured on, or a trial no node can hold, is refused here. Where nothing is left to run, the
    model the resumed sweep's stored study names (Ray is not asked)."""
    if nothing_left:
        if point is not None and accelerator.auto_engines(study, trials):
            # nothing runs: the report is per the GPU model the sweep measured on, as stored
            models = _stored_models(tracking_uri, point.sweep_id, trials)
            if len(models) == 1:
                study = accelerator.resolved(study, models[0])
        return study, pruned
    study, name = resolve_accelerator(study, trials)
    if name is not None:
        events.on_accelerator(f"accelerator: {name} (from the cluster)")
        if any(c.prunes_unfit for c in chain):  # the memory fit needs the GPU model
            pruned = {**(pruned or {}), **unfit_trials(study, trials)}
    if point is not None:
        check_same_accelerator(tracking_uri, point.sweep_id, study, trials, from_cluster=name is not None)
    check_capacity(trials, study.engines)
    return study, pruned


def _left_to_run(plan, events: SweepEvents, outcome: SweepOutcome, done: set[str], copy_trials: list[Trial], *,
                 study: Study, tracking_uri: str, nothing_left: bool) -> tuple[list[Trial], list[tuple[Trial, str]]]:
    """The trials this call starts (`--control` copies first; those whose numbers would mean nothing
    recorded as such, not started) and the node controls still to run; `outcome.skipped`: the trials
    the sweep finished before."""
    trials, only, grid = plan.trials, plan.only, plan.grid
    # `only`: this call runs part of the sweep; the grid's other trials stay pending.
    todo = [t for t in trials if t.id not in done and (only is None or t.id in only)]
    todo = copy_trials + todo  # the controls first: each then shares its machine with all the rest
    todo = _unmeasurable(study, todo, primary=study.grid_primary_profile(grid), sweep_id=outcome.sweep_id,
                         exp_id=outcome.experiment_id, tracking_uri=tracking_uri, on_event=events.on_trial)
    outcome.skipped = [t.id for t in trials if t.id in done and (only is None or t.id in only)]
    # The baseline once more on each node able to run trials, pinned there (farm/analysis/plan.py).
    controls = [] if nothing_left else [
        (t, node) for t, node in passes.node_controls(study, trials, ACTOR_CPUS)
        if t.id not in done and (only is None or t.node_control_of in only)]
    return todo, controls


def _reopen(tracking_uri: str, sweep_id: str, exp_id: str, study: Study, grid: str) -> None:
    """A resumed sweep's parent run opened again. Runs of trials that will run again (cut off, lost,
    cancelled) go, so that each trial id appears once among the sweep's child runs. A store brought
    from another machine: what this sweep writes next goes beside the database, where its earlier
    runs' artifacts now lie (farm/store/location.py)."""
    location.relocate(tracking_uri)
    tracking.drop_unfinished_runs(tracking_uri, sweep_id)
    tracking.reopen_sweep(tracking_uri, sweep_id)
    tracking.keep_reference(tracking_uri, sweep_id, study)
    tracking.keep_trials_view(tracking_uri, exp_id, sweep_id, study.grid_profiles(grid),
                              study.grid_primary_profile(grid))


def _job_maker(study: Study, *, sweep_id: str, exp_id: str, tracking_uri: str, workdir: Path,
               compile_cache: str | None, hosts: str | None, gate: Mapping) -> Callable[..., TrialJob]:
    """`make_job(trial, repeats, pass_index=1)`: the sweep's job for one trial (farm/run/search.py)."""

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
                        parent_run_id=None if later else sweep_id, compile_cache=compile_cache,
                        client_hosts=hosts,
                        # the quality gate (issue 49): a first start answers its items, if it is to
                        quality=None if later else gate.get(t.id))

    return make_job


def _run_chain(plan, events: SweepEvents, chain, outcome: SweepOutcome, *, study: Study, tracking_uri: str,
               todo: list[Trial], controls: list[tuple[Trial, str]], shared_cache: str | None, nothing_left: bool,
               search_durations, measured, scheduled: bool, resumed: bool) -> None:
    """The sweep's strategies in order (`chain`), each planned round by round from what MLflow holds
    (farm/run/search.py), from the trials left to run (`todo`) and the node controls. Ctrl-C (or
    SIGTERM) marks the sweep killed and `outcome` interrupted."""
    grid, trials, sweep_id, exp_id = plan.grid, plan.trials, outcome.sweep_id, outcome.experiment_id
    # trial id -> its quality job (issue 49), from the task the preflight read
    gate = {} if nothing_left else quality_jobs(study, trials, plan.quality_job)
    hosts = None if nothing_left else _client_hosts(sweep_id, todo + [t for t, _ in controls], study)
    make_job = _job_maker(study, sweep_id=sweep_id, exp_id=exp_id, tracking_uri=tracking_uri, workdir=plan.workdir,
                          compile_cache=shared_cache, hosts=hosts, gate=gate)
    max_in_flight = study.grids[grid].max_concurrent_trials or study.max_concurrent_trials
    on_event = events.on_trial
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
                               budget_gpu_hours=plan.budget_gpu_hours, pruned=outcome.pruned, start=plan.start,
                               measured=search_durations, todo=todo, controls=controls,
                               first_repeats=pass_plan.first_pass_repeats(plan.repeats), schedule_at=measured,
                               scheduled=scheduled, stored=stored, resumed=resumed)
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


def _let_go(tracking_uri: str, sweep_id: str | None, resume: str | None, *, heartbeat, old_term,
            started_ray: bool) -> None:
    """What a sweep held, let go as `run_sweep` ends, finished or not."""
    if heartbeat is not None:  # an error: nothing will finish the sweep (its lease let go)
        heartbeat.stop()
    sweep_lease.release_unless_beating(tracking_uri, sweep_id or resume)  # taken, the sweep not begun
    _restore_term(old_term)
    end_compile_cache(sweep_id or "")
    end_client_hosts(sweep_id or "")
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
