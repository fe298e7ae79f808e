"""The bench actor: owns one engine server for one trial and runs every profile of it.

`TrialRunner` is plain Python (usable and testable without Ray); `BenchActor` is the Ray actor
that holds the trial's GPUs and wraps it. One engine start per trial; the prefix cache is reset
before every benchmark run; the engine never outlives the runner (process group + watchdog)."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import threading
import time
from pathlib import Path

import ray

from actors import bench_client, compile_cache, machine, microbench, trial_compile_cache
from actors.datasets import DatasetMissing, prepare_sharegpt
from actors.engine_probes import engine_counters, engine_python, engine_version, reset_prefix_cache
from actors.node import _fresh_dir, _gpu_name, _guidellm_version, _node_client_host, _node_id, _node_ip, _node_label
from actors.quality_eval import run_quality
from actors.trial_job import TrialJob as TrialJob  # its own module now; the driver and tests import it here
from farm.engines import get_engine
from farm.engines.base import Failure, redact_args
from actors.proc import EngineEnvError, EngineExited, EngineProcess, ReadyTimeout, clean_env, expand_env, free_port, tail
from farm.analysis import capacity, outcome
from farm.analysis.twins import same_server
from farm.analysis.results import (ProfileRun, ReportError, Status, TrialResult, WarmupRun, benchmark_window,
                                   parse_report, slim_report, steady_of, stopped_by_time_limit)
from farm.secrets import redact_flags, scrub, secret_values
from farm.study.spec import ProfileSpec
from actors.tokenizer import cache_dir, resolve_tokenizer
from actors.warmup import warm

LOG_TAIL_LINES = 60


class TrackingUnavailable(RuntimeError):
    """The trial ran, but its result could not be stored in MLflow (the driver retries the trial)."""


class TrialRunner:
    def __init__(self, job: TrialJob, client_host=None):
        self.job = job
        self.engine = get_engine(job.trial.engine)
        self.proc: EngineProcess | None = None
        self.dir = _fresh_dir(Path(job.workdir) / job.sweep_id / job.trial.id / f"attempt-{job.attempt}")
        self._lock = threading.Lock()
        self._secrets: list[str] = []
        self._port = 0
        self._cancelled = threading.Event()
        self._group: str | None = None
        self._group_dir = cache_dir() / "compile"
        self._gpu_model: str | None = None
        self._sampled_gpus: list[str] = []  # the GPUs whose clocks each run samples (none for a CPU engine)
        self._no_gpu_why = machine.NO_GPU
        self._machine_key: str | None = None
        # One guidellm client process for the trial's warm-ups and runs (actors/bench_client.py).
        self.client = bench_client.ClientSession(host=client_host)

    # -- helpers -------------------------------------------------------------------------
    def _log_tail(self) -> str:
        return scrub(tail(self.dir / "engine.log", LOG_TAIL_LINES), self._secrets)

    def _classified(self) -> Failure | None:
        """What the engine's own log patterns say of its failure, or None."""
        return self.engine.classify(tail(self.dir / "engine.log", 400, 512_000))

    def _engine_failure(self, default: Status, default_reason: str) -> tuple[Status, str]:
        status, reason = outcome.engine_failure(self._classified(), default, default_reason)
        return status, scrub(reason, self._secrets)

    def _data_files(self, tokenizer: str) -> dict[str, Path | None]:
        files: dict[str, Path | None] = {}
        for name in self.job.trial.profiles:
            profile = self.job.profiles[name]
            if profile.data.kind == "sharegpt":
                files[name] = prepare_sharegpt(profile.data.resolved_path(), cache_dir() / "datasets", tokenizer,
                                               limit=max(profile.requests * 2, 1000))
            else:
                files[name] = None
        return files

    def _engine_env(self, reported: dict) -> tuple[dict[str, str], bool | None]:
        """The engine's environment, and whether its compile cache on this node is empty (a cold
        start; None where the engine keeps no cache farm knows of). A group's cache another node
        or sweep published is pulled first (actors/compile_cache.py); what happened goes into
        `reported`."""
        spec, trial = self.job.engine_spec, self.job.trial
        wanted = self.engine.env(spec, trial)
        # Compile caches live in farm's node cache, one directory per compile group, kept across
        # trials; the study's own environment may put them elsewhere.
        self._group = compile_cache.group_key(self.engine, trial, self._gpu_model)
        self._group_dir = cache_dir() / "compile" / self._group if self._group else cache_dir() / "compile"
        caches = {k: v for k, v in self.engine.cache_env(self._group_dir, trial.all_flags).items() if k not in wanted}
        if caches and self._group:
            reported["compile_cache_group"] = self._group
            trial_compile_cache.pull(self.job.compile_cache, self._group, self._group_dir, reported, self._secrets)
        cold = compile_cache.cache_dirs_cold(caches)
        return clean_env(dict(os.environ), {**caches, **expand_env(wanted, dict(os.environ))}), cold

    # -- the trial -----------------------------------------------------------------------
    def run(self) -> TrialResult:
        job, trial, spec = self.job, self.job.trial, self.job.engine_spec
        gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
        self._gpu_model = _gpu_name(gpus) if trial.gpus else None
        reported: dict = {}
        try:
            env, cold = self._engine_env(reported)
        except EngineEnvError as exc:
            env, cold, env_problem = clean_env(dict(os.environ), {}), None, str(exc)
        else:
            env_problem = None
        if not trial.gpus and "CUDA_VISIBLE_DEVICES" not in spec.env:
            # Ray leaves a 0-GPU actor the node's whole view of its GPUs; an engine that needs
            # none must not touch the GPUs that other trials on this node hold.
            env["CUDA_VISIBLE_DEVICES"] = ""
        secret_flags = self.engine.secret_flags(spec)
        self._secrets = secret_values(env, spec.secret_env, trial.all_flags, secret_flags)
        shown = trial.model_copy(update={"flags": redact_flags(trial.flags, secret_flags),
                                         "required_flags": redact_flags(trial.required_flags, secret_flags)})
        result = TrialResult(
            sweep_id=job.sweep_id, trial=shown,
            status=Status.ok, serve_command=self.engine.serve_command(spec, trial),
            node=socket.gethostname(), node_ip=_node_ip(), node_id=_node_id(), attempt=job.attempt,
            started_at=time.time(), previous_attempts=list(job.previous_attempts),
            gpus=[g for g in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if g],
            artifacts_dir=str(self.dir), guidellm_version=_guidellm_version(),
        )
        if trial.gpus:
            result.gpu_name = self._gpu_model if result.gpus == gpus else _gpu_name(result.gpus)
        self._sampled_gpus = list(result.gpus) if trial.gpus else []
        self._no_gpu_why = machine.NO_GPU if not trial.gpus else "no GPU visible: CUDA_VISIBLE_DEVICES names none"
        result.machine = machine.fingerprint(self._sampled_gpus, none_why=self._no_gpu_why, label=_node_label(machine.MACHINE_LABEL))
        self._microbench(result, env, spec)
        self._machine_key = result.machine.key
        result.engine_reported.update(reported)
        if cold is not None:
            result.engine_reported["compile_cache_cold"] = cold
        if env_problem:
            result.status, result.reason = Status.engine_failed_to_start, env_problem
            result.finished_at = time.time()
            return result
        try:
            self._run(result, env)
        finally:
            self.stop()
            if not self._cancelled.is_set():
                trial_compile_cache.publish(self.job.compile_cache, self._group, self._group_dir, self.engine.name,
                                            self._gpu_model, result.engine_reported, self._secrets)
            result.finished_at = time.time()
            result.log_tail = self._log_tail()
            self._scrub_artifacts()
        if self._cancelled.is_set():
            # Stopped from outside (Ctrl-C, the driver ending): whatever the engine's death looked
            # like, the trial has no answer and a resumed sweep runs it again.
            result.status, result.reason = Status.cancelled, outcome.CANCELLED_REASON
        return result

    def _microbench(self, result: TrialResult, env: dict[str, str], spec) -> None:
        """The host's and the first GPU's speed beside the fingerprint (actors/microbench.py), before
        the engine starts; the GPU part in the engine's Python and environment (its torch)."""
        assert result.machine is not None
        result.machine = result.machine.model_copy(update=microbench.host_bench())
        if not self._sampled_gpus:
            result.machine.gpu_bench_not_measured = self._no_gpu_why
            return
        launcher = self.engine.launcher(spec)
        python = engine_python(launcher, env)
        if python is None:
            result.machine.gpu_bench_not_measured = f"no Python of the engine's to run it in (launcher {launcher[:1]})"
            return
        figures, why = microbench.gpu_bench(python, env, self._sampled_gpus[0], cache_dir())
        result.machine = result.machine.model_copy(update=figures or {"gpu_bench_not_measured": why})

    def _run(self, result: TrialResult, env: dict[str, str]) -> None:
        trial, spec = self.job.trial, self.job.engine_spec
        tokenizer = resolve_tokenizer(trial.tokenizer, trial.model)
        try:
            data_files = self._data_files(tokenizer)
        except DatasetMissing as exc:
            result.status, result.reason = Status.dataset_missing, f"dataset not found on node {result.node}: {exc}"
            return

        port = free_port(spec.host)
        self._port = port
        argv = self.engine.command(spec, trial, port=port, gpu_ids=result.gpus or None)
        result.command = redact_args(argv, self.engine.secret_flags(spec))
        (self.dir / "command.txt").write_text(" ".join(result.command) + "\n")
        # The version probe (package metadata where it can say; else the engine's --version, which
        # imports the engine: seconds of CPU, no GPU) runs beside the engine's start instead of
        # before it, while the trial already holds its GPUs.
        version: list[str | None] = []
        probe = threading.Thread(target=lambda: version.append(engine_version(self.engine, spec, env)), daemon=True)
        probe.start()
        try:
            self._start_and_run(result, env, argv, port, tokenizer, data_files)
        finally:
            probe.join()
            result.engine_version = version[0] if version else None

    def _start_and_run(self, result: TrialResult, env: dict[str, str], argv: list[str], port: int, tokenizer: str,
                       data_files: dict[str, Path | None]) -> None:
        job, trial, spec = self.job, self.job.trial, self.job.engine_spec
        problem = warm(self.engine, spec, trial.model, env, cache_dir() / "warm", spec.ready_timeout_s)
        if problem:
            result.engine_reported["warmup"] = scrub(problem, self._secrets)
        with self._lock:
            if self._cancelled.is_set():
                return
            self.proc = EngineProcess(argv, env, self.dir / "engine.log", secrets=self._secrets)
            self.proc.start()
            self.client.start(self.dir / "guidellm-client.log")
        result.engine_pid, result.engine_port = self.proc.pid, port
        # Where to find the engine while it runs (operators, tests killing it from outside).
        (self.dir / "engine.pid").write_text(f"{self.proc.pid} {port}\n")
        base_url = f"http://{spec.host}:{port}"
        try:
            ready_s = self.proc.wait_ready(base_url + self.engine.ready_path, spec.ready_timeout_s,
                                           fatal=self.engine.classify)
        except EngineExited as exc:
            result.status, result.reason = self._engine_failure(Status.engine_failed_to_start, str(exc))
            # the limits its refusal named (a search repairs the command with them)
            result.engine_reported.update(self.engine.named_limits(tail(self.dir / "engine.log", 400, 512_000)))
            return
        except ReadyTimeout as exc:
            result.status, result.reason = self._engine_failure(Status.engine_failed_to_start, str(exc))
            return
        start_log = tail(self.dir / "engine.log", 2000, 2_000_000)
        result.engine_reported.update({"ready_s": round(ready_s, 2), **self.engine.reported_capacity(start_log),
                                       **self.engine.reported_startup(start_log)})
        # An engine that overrode the knob setting this trial apart from one already measured may
        # run that trial's server exactly: its log says so, and nothing is measured twice.
        same = same_server(trial, result.engine_reported, job.twins, gpu_name=result.gpu_name)
        if same is not None:
            result.status, result.reason = Status.same_server, same.reason
            result.engine_reported["same_server_as"] = same.twin.trial_id
            return
        if not self._warm_up_profiles(result, base_url, tokenizer, data_files):
            return
        self._measure(result, base_url, tokenizer, data_files)

    def _warm_up_profiles(self, result: TrialResult, base_url: str, tokenizer: str,
                          data_files: dict[str, Path | None]) -> bool:
        """Each profile's warm-up on the started engine; False when the engine died in one (the
        trial's status says so)."""
        job, trial = self.job, self.job.trial
        for name in trial.profiles:
            # every profile warms up after every engine start (a later pass, a rung, a search step),
            # unless it says `warmup_requests: 0` or the engine has nothing to warm (the mock)
            if job.profiles[name].warmup_count(self.engine.warms_up) and not self._cancelled.is_set():
                warm_run = self._warmup(name, base_url, tokenizer, data_files.get(name))
                result.warmup_runs.append(warm_run)
                if self.proc is not None and not self.proc.alive():
                    result.status, result.reason = self._engine_failure(
                        Status.engine_crashed, f"engine exited with code {self.proc.poll()} during the warm-up of {name}")
                    return False
        return True

    def _measure(self, result: TrialResult, base_url: str, tokenizer: str, data_files: dict[str, Path | None]) -> None:
        """The trial's runs in a seeded order, its capacity searches, its status, then the quality gate."""
        job, trial = self.job, self.job.trial
        # A block may ask for more runs of some profiles (first pass only: a later pass of
        # `--repeats auto` says itself how many more runs it wants).
        searches = [name for name in trial.profiles if job.profiles[name].capacity is not None]
        counts = {name: max(job.repeats, trial.profile_repeats.get(name, 0) if job.first_pass else 0)
                  for name in trial.profiles if name not in searches}
        plan = [(name, r) for name in counts for r in range(counts[name])]
        # Interleave profiles and repeats in a seeded order, so drift over time (thermals, a noisy
        # neighbour) does not line up with one profile.
        random.Random(f"{job.order_seed}:{trial.id}").shuffle(plan)
        for name, repeat in plan:
            if self._cancelled.is_set():
                break
            run = self._run_profile(name, repeat, base_url, tokenizer, data_files.get(name))
            if outcome.lost_by_client_only(run) and not self._cancelled.is_set():
                run = self._run_again(run, name, repeat, base_url, tokenizer, data_files.get(name))
            result.runs.append(run)
            if run.status in outcome.STOPS_TRIAL:
                break
        # A capacity search runs once per trial (more repeats or passes add no load to search).
        ended = any(r.status in outcome.STOPS_TRIAL for r in result.runs)
        search = job.first_pass if job.search_capacity is None else job.search_capacity
        for name in searches if search and not ended else []:
            if self._search(name, base_url, tokenizer, data_files.get(name), result):
                break
        result.runs.sort(key=lambda r: (trial.profiles.index(r.profile), r.repeat))
        # A search's run that broke the SLO past the capacity (time limit, failed requests) is a
        # point of its curve, not a failed trial; only a dead engine is.
        judged = [r for r in result.runs if r.load is None or r.status in outcome.STOPS_TRIAL]
        result.status, result.reason = outcome.trial_status(judged)
        if job.quality is not None and not self._cancelled.is_set() and self.proc is not None and self.proc.alive():
            # The quality gate, on the same engine start (actors/quality_eval.py); a failure is its data.
            result.quality = run_quality(job.quality, base_url, trial.model, self.dir, cancelled=self._cancelled,
                                         alive=self.proc.alive)

    def _search(self, name: str, base_url: str, tokenizer: str, data_file: Path | None, result: TrialResult) -> bool:
        """The capacity search of one profile (farm/analysis/capacity.py picks each load); True when
        the engine died under it."""
        profile = self.job.profiles[name]
        floor = outcome.success_floor(profile, self.job.min_success_rate)
        points: list[capacity.Point] = []
        while not self._cancelled.is_set() and (load := capacity.next_load(profile.capacity, points)) is not None:
            run = self._run_profile(name, len(points), base_url, tokenizer, data_file, at=profile.at_load(load))
            run.load = load
            result.runs.append(run)
            if run.status in outcome.STOPS_TRIAL:
                return True
            metrics = run.metrics.model_dump(exclude_none=True) if run.metrics else None
            points.append(capacity.point(load, metrics, run.status == Status.ok, profile.slo, floor))
        return False

    def _warmup(self, name: str, base_url: str, tokenizer: str, data_file: Path | None) -> WarmupRun:
        """An unrecorded run of the profile's data at its concurrency (`ProfileSpec.warmup_count`): the
        first run after a start was 4 % slower than the next two on the H200, 17 % on the H100 (lazy
        initialisation, allocator growth)."""
        profile = self.job.profiles[name]
        count = profile.warmup_count(self.engine.warms_up)
        started = time.time()
        stem = f"{name}-warmup"
        spec = bench_client.scenario_spec(profile, target=base_url, model=self.job.trial.model, tokenizer=tokenizer,
                                          output=self.dir / f"{stem}.json", data_file=data_file,
                                          requests=count)
        client = self.client.run(spec, workdir=self.dir, name=stem, timeout_s=outcome.client_timeout_s(profile),
                                         engine_alive=lambda: self.proc is not None and self.proc.alive(),
                                         cancelled=self._cancelled.is_set)
        warm = WarmupRun(profile=name, requests=count, seconds=round(time.time() - started, 2),
                         ok=client.returncode == 0 and not client.timed_out)
        if not warm.ok:
            warm.reason = "timed out" if client.timed_out else (
                f"guidellm exited with {client.returncode}: " + tail(client.log_path, 2).replace("\n", " | "))
        return warm

    def _run_again(self, lost: ProfileRun, name: str, repeat: int, base_url: str, tokenizer: str,
                   data_file: Path | None) -> ProfileRun:
        """The run once more after guidellm lost requests the server answered (outcome.lost_by_client_only):
        its report is kept beside as `<profile>-r<repeat>-lost.json` and the new run says so. Once:
        a second loss stands as the run's failure."""
        kept = None
        if lost.report_file and (self.dir / lost.report_file).is_file():
            kept = f"{name}-r{repeat}-lost.json"
            (self.dir / lost.report_file).rename(self.dir / kept)
        again = self._run_profile(name, repeat, base_url, tokenizer, data_file)
        m = lost.metrics
        again.warnings.append(
            f"run again: its first attempt lost {m.client_lost_requests:.0f} of {m.total_requests:.0f} requests in the "
            f"client (sent, answered by the server, never accounted for by guidellm; nothing errored)"
            + (f"; that attempt's report: {kept}" if kept else ""))
        return again

    def _run_profile(self, name: str, repeat: int, base_url: str, tokenizer: str, data_file: Path | None,
                     at: ProfileSpec | None = None) -> ProfileRun:
        """One run of profile `name` (`at`: the profile at one load of its capacity search)."""
        job, trial = self.job, self.job.trial
        profile = at or job.profiles[name]
        run = ProfileRun(profile=name, repeat=repeat, status=Status.ok, started_at=time.time())
        run.cache_reset = reset_prefix_cache(self.engine, base_url)
        before = engine_counters(self.engine, base_url)
        stem = f"{name}-r{repeat}"
        report = self.dir / f"{stem}.json"
        spec = bench_client.scenario_spec(profile, target=base_url, model=trial.model, tokenizer=tokenizer,
                                          output=report, data_file=data_file)
        timeout_s = outcome.client_timeout_s(profile)
        sampler = machine.GpuSampler(self._sampled_gpus, none_why=self._no_gpu_why).start()
        client = self.client.run(spec, workdir=self.dir, name=stem, timeout_s=timeout_s,
                                         engine_alive=lambda: self.proc is not None and self.proc.alive(),
                                         cancelled=self._cancelled.is_set)
        run.finished_at = time.time()
        window: tuple[float, float] | None = None
        run.machine = self._machine_key
        run.client_forked = client.forked
        after = engine_counters(self.engine, base_url)
        run.engine_counters = {k: after[k] - before[k] for k in after if k in before}
        # A search's run is judged against the SLO by the search, not failed here for its success rate.
        floor = 0.0 if at is not None else outcome.success_floor(profile, job.min_success_rate)
        facts = dict(requests=profile.requests, max_seconds=profile.max_seconds, timeout_s=timeout_s,
                     min_success_rate=floor,
                     client_timed_out=client.timed_out, client_exit=client.returncode)
        if self.proc is not None and not self.proc.alive():
            facts.update(engine_died=True, engine_exit=self.proc.poll(), engine_failure=self._classified())
        elif not client.timed_out:  # a client stopped mid-run left no report of it
            try:
                raw = json.loads(report.read_text())
                run.metrics, _ = parse_report(raw, profile.requests)
                window = benchmark_window(raw)
                steady = steady_of(raw["benchmarks"][-1])
                if steady.why:
                    run.warnings.append(f"no steady-state throughput: {steady.why}")
                report.write_text(json.dumps(slim_report(raw)))
                run.report_file = report.name
                facts.update(metrics=run.metrics, stopped_by_time_limit=at is None and stopped_by_time_limit(raw))
            except (OSError, ValueError, ReportError) as exc:
                facts.update(report_error=str(exc), client_log=tail(client.log_path, 200))
        run.gpu = sampler.stop(window)
        status, reason = outcome.judge_run(outcome.RunFacts(**facts))
        run.status, run.reason = status, scrub(reason, self._secrets) if reason else None
        return run

    def _scrub_artifacts(self) -> None:
        """Engines echo their arguments (and sometimes their environment) into their logs."""
        if not self._secrets:
            return
        for path in self.dir.iterdir():
            if path.is_file() and path.suffix in {".log", ".txt", ".json"}:
                text = path.read_text(errors="replace")
                cleaned = scrub(text, self._secrets)
                if cleaned != text:
                    path.write_text(cleaned)

    def cancel(self) -> None:
        """Stop from outside: the engine goes now and the trial ends as `cancelled`."""
        self._cancelled.set()
        self.stop()

    def stop(self) -> None:
        with self._lock:
            self.client.close(wait_s=0)  # its runs are over: nothing of its is left to write
            if self.proc is None:
                return
            self.proc.stop()
            # A container outlives its `docker run` client: remove it by name.
            cleanup = self.engine.cleanup_command(self.job.engine_spec, self.job.trial, port=self._port)
            if cleanup:
                subprocess.run(cleanup, capture_output=True, timeout=60)


# SPREAD: trials go to every node rather than filling one first (an option given at creation,
# e.g. node affinity for a retry, replaces it). GPUs per trial come from `num_gpus` at creation:
# Ray puts them all on one node and never hands out more than a node has.
@ray.remote(max_restarts=0, max_task_retries=0, scheduling_strategy="SPREAD")
class BenchActor:
    """One trial on one node: holds the trial's GPUs for as long as its engine runs."""

    def __init__(self, job_json: str):
        self.job = TrialJob.model_validate_json(job_json)
        self.runner = TrialRunner(self.job, client_host=_node_client_host(self.job))

    def __repr__(self) -> str:
        # Ray reports this as the actor's `repr_name` (State API): `farm status` reads which trial
        # a live actor of the sweep's namespace runs from it. (Ray may ask before __init__ ran.)
        job = getattr(self, "job", None)
        return job.trial.id if job is not None else type(self).__name__

    def node(self) -> dict:
        ctx = ray.get_runtime_context()
        return {"node_id": ctx.get_node_id(), "pid": os.getpid(),
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", "")}

    def engine_pid(self) -> int | None:
        return self.runner.proc.pid if self.runner.proc else None

    def engine_port(self) -> int | None:
        return self.runner._port or None

    def run(self) -> str:
        """Run the trial; a final result is in MLflow before this returns.

        A transient failure (the driver retries it) and a cancelled trial are not logged here:
        the driver asks for `record()` only when a transient failure is the last word."""
        # MLflow opened beside the engine's start rather than after the last run: importing it and
        # opening a SQLite store cost ~3 s (2 cores), and every trial's slot waited for them before
        # the next trial could start (bench/overhead.py).
        threading.Thread(target=self._open_tracking, daemon=True).start()
        self.result = self.runner.run()
        if outcome.logged_by_actor(self.result.status):
            self.record()
        return self.result.model_dump_json()

    def _open_tracking(self) -> None:
        if not (self.job.tracking_uri and self.job.parent_run_id):
            return
        try:
            from farm.store import tracking

            tracking.preload(self.job.tracking_uri, self.job.parent_run_id)  # MLflow keeps it for record()
        except Exception:  # noqa: BLE001 - only a head start: record() retries and says what failed
            pass

    def record(self) -> None:
        """Log this actor's result as a child run of the sweep, with its artifacts."""
        if not (self.job.tracking_uri and self.job.parent_run_id):
            return
        from farm.store import tracking

        for delay in (1, 3, 9, None):  # a shared MLflow server may blink; the trial took minutes
            try:
                tracking.log_trial(self.job.tracking_uri, self.job.experiment_id, self.job.parent_run_id,
                                   self.result, Path(self.result.artifacts_dir))
                return
            except Exception as exc:  # MLflow raises its own, requests' and httpx's errors
                if delay is None:
                    raise TrackingUnavailable(f"could not store the result in MLflow: {type(exc).__name__}: "
                                              f"{str(exc).splitlines()[0][:300] if str(exc) else ''}") from None
                time.sleep(delay)

    def stop(self) -> None:
        self.runner.cancel()
