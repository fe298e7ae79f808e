"""The sweep driver: one Ray actor per trial, at most N in flight, retries only where they help.

Runs on the machine that calls `farm sweep` (local Ray started on demand) or inside a Ray job
on the cluster's head. Every finished trial is logged to MLflow by its actor before the driver
hears of it, so a driver that dies loses nothing: `--resume SWEEP_ID` runs only what is missing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import ray
from ray.exceptions import ActorDiedError, RayActorError, RayError

from actors.bench import BenchActor, TrialJob
from farm import metrics, tracking
from farm.errors import UserError
from farm.jobs import tag_sweep_with_submission
from farm.results import TRANSIENT, Status, TrialResult
from farm.spec import Study
from farm.trial import Trial

# The driver process needs little; the actor's own CPU holds the guidellm client.
ACTOR_CPUS = 1


@dataclass
class SweepOutcome:
    sweep_id: str
    experiment_id: str
    results: list[TrialResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    interrupted: bool = False


def actor_name(sweep_id: str, trial: Trial, attempt: int) -> str:
    """Readable in the Ray dashboard: engine, short id, what differs, sweep, attempt."""
    differs = ",".join(f"{k}={v}" for k, v in trial.flags.items() if not isinstance(v, (dict, list)))[:60]
    label = trial.name or differs or "default"
    return f"{trial.engine}:{trial.id.split('-')[-1]}:{label}:{sweep_id[:8]}:a{attempt}"


def check_capacity(trials: list[Trial]) -> None:
    """A trial that needs more GPUs than any node has would wait forever: refuse it now."""
    per_node = [n.get("Resources", {}).get("GPU", 0) for n in ray.nodes() if n.get("Alive")]
    most = max(per_node, default=0)
    for t in trials:
        if t.gpus > most:
            raise UserError(f"trial {t.label} needs {t.gpus} GPU(s) on one node; the largest node has {int(most)}",
                            key=f"trials.{t.id}")


def _lost_result(job: TrialJob, exc: Exception) -> TrialResult:
    return TrialResult(sweep_id=job.sweep_id, trial=job.trial, status=Status.node_lost,
                       reason=f"actor or node lost: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}",
                       attempt=job.attempt, started_at=time.time(), finished_at=time.time())


def run_trials(jobs: list[TrialJob], *, max_in_flight: int, max_retries: int,
               on_event: Callable[[str, TrialJob, TrialResult | None], None] = lambda *a: None,
               log_lost: Callable[[TrialResult], None] = lambda r: None) -> list[TrialResult]:
    """Run every job as an actor; returns one final result per trial, in job order."""
    pending = list(jobs)
    running: dict[ray.ObjectRef, tuple[TrialJob, ray.actor.ActorHandle]] = {}
    final: dict[str, TrialResult] = {}
    try:
        while pending or running:
            while pending and len(running) < max_in_flight:
                job = pending.pop(0)
                actor = BenchActor.options(
                    name=actor_name(job.sweep_id, job.trial, job.attempt),
                    num_gpus=job.trial.gpus, num_cpus=ACTOR_CPUS, max_concurrency=2,
                ).remote(job.model_dump_json())
                running[actor.run.remote()] = (job, actor)
                on_event("started", job, None)
            done, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
            for ref in done:
                job, actor = running.pop(ref)
                lost = False
                try:
                    result = TrialResult.model_validate_json(ray.get(ref))
                except (RayActorError, ActorDiedError, RayError) as exc:
                    result, lost = _lost_result(job, exc), True
                finally:
                    ray.kill(actor, no_restart=True)
                if result.status in TRANSIENT and job.attempt <= max_retries:
                    on_event("retry", job, result)
                    pending.append(job.model_copy(update={"attempt": job.attempt + 1}))
                    continue
                if lost:
                    # The actor died before it could log; the sweep must still show the loss.
                    log_lost(result)
                final[job.trial.id] = result
                on_event("finished", job, result)
    except BaseException:
        # Ctrl-C or a crash: stop every engine before leaving (the actors' watchdogs are the
        # second line of defence if this process is killed outright).
        stops = [actor.stop.remote() for _, actor in running.values()]
        try:
            ray.wait(stops, num_returns=len(stops), timeout=30)
        finally:
            for _, actor in running.values():
                ray.kill(actor, no_restart=True)
        raise
    return [final[j.trial.id] for j in jobs if j.trial.id in final]


def run_sweep(study: Study, grid: str, trials: list[Trial], *, tracking_uri: str, experiment: str,
              address: str | None, resume: str | None, repeats: int, workdir: Path, command: str,
              on_event: Callable[[str, TrialJob, TrialResult | None], None] = lambda *a: None,
              on_sweep: Callable[[str], None] = lambda s: None) -> SweepOutcome:
    started_ray = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(address="local", log_to_driver=False)  # never join a cluster `ray start` left running here
            started_ray = True
    try:
        check_capacity(trials)
        if resume:
            sweep_id = resume
            exp_id = tracking.client(tracking_uri).get_run(sweep_id).info.experiment_id
            done = tracking.finished_trial_ids(tracking_uri, sweep_id)
            tracking.reopen_sweep(tracking_uri, sweep_id)
        else:
            exp_id, sweep_id = tracking.start_sweep(tracking_uri, experiment, study, grid, trials,
                                                    command=command, repeats=repeats)
            done = set()
        on_sweep(sweep_id)
        tag_sweep_with_submission(tracking_uri, sweep_id)  # inside a Ray job: which job runs this sweep
        outcome = SweepOutcome(sweep_id=sweep_id, experiment_id=exp_id)
        todo = [t for t in trials if t.id not in done]
        outcome.skipped = [t.id for t in trials if t.id in done]
        jobs = [
            TrialJob(sweep_id=sweep_id, trial=t, engine_spec=study.engines[t.engine],
                     profiles={p: study.profiles[p] for p in t.profiles}, repeats=repeats,
                     min_success_rate=study.min_success_rate, workdir=str(workdir), order_seed=0,
                     tracking_uri=tracking_uri, experiment_id=exp_id, parent_run_id=sweep_id)
            for t in todo
        ]
        max_in_flight = study.grids[grid].max_concurrent_trials or study.max_concurrent_trials
        # farm's metrics on Ray's Prometheus endpoint, for the dashboard's charts (farm/metrics.py)
        on_event = metrics.watch(on_event, sweep_id, len(jobs))

        def log_lost(result: TrialResult) -> None:
            tracking.log_trial(tracking_uri, exp_id, sweep_id, result, None)

        try:
            run_trials(jobs, max_in_flight=max_in_flight, max_retries=study.max_retries,
                       on_event=on_event, log_lost=log_lost)
        except KeyboardInterrupt:
            outcome.interrupted = True
            tracking.finish_sweep(tracking_uri, sweep_id, "killed")
        outcome.results = tracking.load_results(tracking_uri, sweep_id)
        return outcome
    finally:
        if started_ray:
            ray.shutdown()

