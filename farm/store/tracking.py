"""MLflow: parent run = sweep, child run = trial.

Child runs are written by the actor that ran the trial, as soon as it finishes (artifacts go
over HTTP to a shared server on a cluster), so every finished trial is in MLflow even if the
driver dies later. Each child carries the full `TrialResult` as `result.json`, from which
`farm report` and `--resume` rebuild the sweep.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import yaml
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from pydantic import ValidationError

from farm.errors import UserError, key_path
from farm.analysis.limits import effective_limits, overrides_text
from farm.analysis.results import FINISHED, Status, TrialResult
from farm.secrets import redact_study, redact_trial
from farm.study.spec import Study
from farm.study.trial import Trial

# Progress bars for every artifact download would drown the sweep's own output.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

KIND_TAG = "farm.kind"
SWEEP_TAG = "farm.sweep_id"
TRIAL_TAG = "farm.trial_id"
STATUS_TAG = "farm.status"
PARENT_TAG = "mlflow.parentRunId"
METRICS = ("total_tps", "output_tps", "request_throughput", "success_rate", "duration_s",
           "ttft_mean_ms", "ttft_p95_ms", "ttft_p99_ms", "tpot_mean_ms", "tpot_p95_ms", "itl_mean_ms",
           "latency_mean_s", "latency_p95_s", "guidellm_total_tps_mean", "successful_requests",
           "total_input_tokens", "total_output_tokens")


def default_tracking_uri() -> str:
    """MLflow's own default: a SQLite store in the working directory, no server needed."""
    from farm.inputs import env_tracking_uri  # MLFLOW_TRACKING_URI, checked at the boundary

    return env_tracking_uri() or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def client(uri: str) -> MlflowClient:
    return MlflowClient(tracking_uri=uri)


def experiment_id(uri: str, name: str) -> str:
    c = client(uri)
    exp = c.get_experiment_by_name(name)
    return exp.experiment_id if exp else c.create_experiment(name)


def start_sweep(uri: str, experiment: str, study: Study, grid: str, trials: list[Trial], *,
                command: str, repeats: int) -> tuple[str, str]:
    """Create the parent run; returns (experiment id, sweep id = run id)."""
    c = client(uri)
    exp_id = experiment_id(uri, experiment)
    run = c.create_run(exp_id, run_name=f"{study.name}:{grid}", tags={
        KIND_TAG: "sweep", "farm.study": study.name, "farm.grid": grid, STATUS_TAG: "running",
    })
    sweep_id = run.info.run_id
    c.log_batch(sweep_id, params=[
        Param("study", study.name), Param("grid", grid), Param("trials", str(len(trials))),
        Param("profiles", ",".join(study.grid_profiles(grid))), Param("repeats", str(repeats)),
        Param("primary_profile", study.grid_primary_profile(grid)), Param("command", command[:6000]),
    ], tags=[RunTag(SWEEP_TAG, sweep_id)])
    from farm.engines import get_engine

    shown = [redact_trial(t, get_engine(t.engine).secret_flags(study.engines[t.engine])) for t in trials]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "study.yaml").write_text(yaml.safe_dump(redact_study(study), sort_keys=False))
        (Path(tmp) / "trials.json").write_text(json.dumps([t.model_dump(mode="json") for t in shown], indent=1))
        c.log_artifacts(sweep_id, tmp, "sweep")
    return exp_id, sweep_id


def get_sweep(uri: str, sweep_id: str):
    """The parent run of a sweep, or None."""
    try:
        run = client(uri).get_run(sweep_id)
    except Exception:  # MLflow raises its own error type for an unknown id
        return None
    return run if run.data.tags.get(KIND_TAG) == "sweep" else None


def reopen_sweep(uri: str, sweep_id: str) -> None:
    c = client(uri)
    c.update_run(sweep_id, status="RUNNING")
    c.set_tag(sweep_id, STATUS_TAG, "running")


def finish_sweep(uri: str, sweep_id: str, status: str, files: list[Path] | None = None) -> None:
    """status: 'finished', 'killed' or 'failed' (MLflow's run status follows)."""
    c = client(uri)
    for path in files or []:
        if path.is_dir():
            c.log_artifacts(sweep_id, str(path), "report")
        elif path.is_file():
            c.log_artifact(sweep_id, str(path), "report")
    c.set_tag(sweep_id, STATUS_TAG, status)
    c.set_terminated(sweep_id, status={"finished": "FINISHED", "partial": "FINISHED", "killed": "KILLED"}.get(status, "FAILED"))


def _mean(values: list[float]) -> float:
    return statistics.fmean(values)


def trial_metrics(result: TrialResult) -> list[Metric]:
    now = int(time.time() * 1000)
    out: list[Metric] = []
    for profile in result.trial.profiles:
        runs = [r for r in result.runs_of(profile) if r.metrics is not None]
        for name in METRICS:
            values = [getattr(r.metrics, name) for r in runs if getattr(r.metrics, name) is not None]
            if not values:
                continue
            out.append(Metric(f"{profile}/{name}", _mean(values), now, 0))
            if len(values) > 1:
                out += [Metric(f"{profile}/runs/{name}", v, now, r.repeat)
                        for r, v in zip(runs, values)]
    return out


LOG_TAIL_TAG_LINES = 25


def log_trial(uri: str, exp_id: str | None, sweep_id: str, result: TrialResult, artifacts_dir: Path | None) -> str:
    """One child run with params, tags, metrics and artifacts; returns its run id.

    The status tag is written last: a run that lacks it was cut off while logging (the actor
    or the server died) and counts as not finished; a failed upload removes its partial run.
    """
    c = client(uri)
    exp_id = exp_id or c.get_run(sweep_id).info.experiment_id
    trial = result.trial
    run = c.create_run(exp_id, run_name=trial.label, start_time=int((result.started_at or time.time()) * 1000), tags={
        PARENT_TAG: sweep_id, KIND_TAG: "trial", SWEEP_TAG: sweep_id, TRIAL_TAG: trial.id,
        "farm.engine": trial.engine, "farm.node": result.node or "", "farm.node_id": result.node_id or "",
        "farm.gpus": ",".join(result.gpus), "farm.engine_version": result.engine_version or "",
        "farm.attempt": str(result.attempt),
    })
    run_id = run.info.run_id
    try:
        _log_trial_body(c, run_id, result, artifacts_dir)
    except BaseException:
        try:
            c.delete_run(run_id)
        except Exception:  # the server is what failed; resume ignores a run without a status
            pass
        raise
    return run_id


def _log_trial_body(c: MlflowClient, run_id: str, result: TrialResult, artifacts_dir: Path | None) -> None:
    trial = result.trial
    params = [Param("engine", trial.engine), Param("model", trial.model), Param("trial_id", trial.id),
              Param("gpus", str(trial.gpus)), Param("profiles", ",".join(trial.profiles))]
    if trial.name:
        params.append(Param("name", trial.name))
    params += [Param(f"flag.{k}", json.dumps(v) if isinstance(v, (dict, list)) else str(v))
               for k, v in trial.all_flags.items()]
    params += [Param(f"knob.{k}", json.dumps(v) if isinstance(v, (dict, list)) else str(v))
               for k, v in (trial.knobs or {}).items()]
    # The limits the engine ran under (its log), beside the knobs that asked: limit.<name>, and the
    # knobs it overrode as a tag (farm/analysis/limits.py).
    limits = effective_limits(trial.engine, trial.knobs or {}, trial.all_flags, result.engine_reported)
    if limits is not None:
        params += [Param(f"limit.{k}", str(v)) for k, v in limits.model_dump(exclude_none=True).items()
                   if k != "knob_overridden"]
    tags = []
    if limits is not None and limits.knob_overridden:
        tags.append(RunTag("farm.knob_overridden", overrides_text(limits)[:5000]))
    if result.reason:
        tags.append(RunTag("farm.reason", result.reason[:5000]))
    if result.status != Status.ok and result.log_tail:
        # The engine's last words, readable in the run's overview without opening an artifact
        # (scrubbed of secrets by the actor; the whole log is under files/engine.log).
        tail_lines = "\n".join(result.log_tail.splitlines()[-LOG_TAIL_TAG_LINES:])
        tags.append(RunTag("farm.log_tail", tail_lines[-5000:]))
    if result.previous_attempts:
        tags.append(RunTag("farm.previous_attempts", "\n".join(result.previous_attempts)[:5000]))
    c.log_batch(run_id, metrics=trial_metrics(result), params=params, tags=tags)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "result.json").write_text(result.model_dump_json(indent=1))
        (Path(tmp) / "command.txt").write_text(result.serve_command + "\n")
        if result.log_tail:
            (Path(tmp) / "engine-log-tail.txt").write_text(result.log_tail + "\n")
        c.log_artifacts(run_id, tmp)
    if artifacts_dir and Path(artifacts_dir).is_dir():
        c.log_artifacts(run_id, str(artifacts_dir), "files")
    c.set_tag(run_id, STATUS_TAG, result.status.value)
    end = int((result.finished_at or time.time()) * 1000)
    c.set_terminated(run_id, status="FINISHED" if result.status == Status.ok else "FAILED", end_time=end)


def trial_runs(uri: str, sweep_id: str) -> list:
    """All child runs of a sweep."""
    c = client(uri)
    exp_id = c.get_run(sweep_id).info.experiment_id
    return c.search_runs([exp_id], filter_string=f"tags.`{PARENT_TAG}` = '{sweep_id}'", max_results=50000)


def finished_trial_ids(uri: str, sweep_id: str) -> set[str]:
    """Trials of this sweep that have a final answer (resume does not run them again)."""
    finished = {s.value for s in FINISHED}
    return {r.data.tags.get(TRIAL_TAG) for r in trial_runs(uri, sweep_id)
            if r.data.tags.get(STATUS_TAG) in finished}


def drop_unfinished_runs(uri: str, sweep_id: str) -> list[str]:
    """Before a resume: delete (MLflow's soft delete) the child runs of trials that will run
    again (cut off while logging, lost, cancelled, or out of retries on a transient failure),
    so each trial id appears once among the sweep's runs. Returns the run ids deleted."""
    finished = {s.value for s in FINISHED}
    c = client(uri)
    dropped = []
    for run in trial_runs(uri, sweep_id):
        if run.data.tags.get(STATUS_TAG) not in finished:
            c.delete_run(run.info.run_id)
            dropped.append(run.info.run_id)
    return dropped


def load_results(uri: str, sweep_id: str) -> list[TrialResult]:
    """Every trial result of a sweep, from the `result.json` artifacts (latest attempt wins)."""
    c = client(uri)
    by_trial: dict[str, TrialResult] = {}
    for run in sorted(trial_runs(uri, sweep_id), key=lambda r: r.info.start_time or 0):
        with tempfile.TemporaryDirectory() as tmp:
            try:
                path = c.download_artifacts(run.info.run_id, "result.json", tmp)
            except Exception:  # a run logged without its result (older schema, interrupted upload)
                continue
            try:
                result = TrialResult.model_validate_json(Path(path).read_bytes())
            except ValidationError as exc:  # stored by a farm with another result schema
                err = exc.errors()[0]
                raise UserError(f"does not fit this farm's result schema ({err['msg']})",
                                file=f"run {run.info.run_id}: result.json", key=key_path(err["loc"]) or None) from None
        by_trial[result.trial.id] = result
    return sorted(by_trial.values(), key=lambda r: r.trial.index)


def load_study_snapshot(uri: str, sweep_id: str) -> Study:
    c = client(uri)
    with tempfile.TemporaryDirectory() as tmp:
        path = c.download_artifacts(sweep_id, "sweep/study.yaml", tmp)
        # Read like a user's study: a snapshot an older farm stored may not fit this one's schema.
        from farm.inputs import read_yaml_file
        from farm.study.spec import validate_study

        shown = f"sweep {sweep_id}: sweep/study.yaml"
        return validate_study(read_yaml_file(path, shown=shown), shown)


# --------------------------------------------------------------------------------------
# `--repeats auto`: a later pass appended to its trial's child run


def trial_run_ids(uri: str, sweep_id: str) -> dict[str, str]:
    """Trial id -> the child run `load_results` reads for it (the latest one with a result)."""
    out: dict[str, str] = {}
    for run in sorted(trial_runs(uri, sweep_id), key=lambda r: r.info.start_time or 0):
        trial = run.data.tags.get(TRIAL_TAG)
        if trial:
            out[trial] = run.info.run_id
    return out


def append_pass(uri: str, run_id: str, merged: TrialResult, new: TrialResult, pass_index: int,
                artifacts_dir: Path | None) -> None:
    """Append a later pass of `--repeats auto` to the trial's child run (one child run per trial).

    `<profile>/<metric>` gets the mean over every run so far at step `pass_index - 1` (the UI shows
    the latest step); `<profile>/runs/<metric>` gets the new runs at their repeat numbers;
    `result.json` is replaced by the merged result; the pass's files go under `files/pass-N`.
    """
    c = client(uri)
    now = int(time.time() * 1000)
    metrics: list[Metric] = []
    for profile in merged.trial.profiles:
        runs = [r for r in merged.runs_of(profile) if r.metrics is not None]
        for name in METRICS:
            values = [(r, getattr(r.metrics, name)) for r in runs if getattr(r.metrics, name) is not None]
            if not values:
                continue
            metrics.append(Metric(f"{profile}/{name}", _mean([v for _, v in values]), now, pass_index - 1))
            metrics += [Metric(f"{profile}/runs/{name}", v, now, r.repeat) for r, v in values
                        if r.pass_index == pass_index]
    repeats = max((len(merged.runs_of(p)) for p in merged.trial.profiles), default=0)
    tags = [RunTag(STATUS_TAG, merged.status.value), RunTag("farm.passes", str(pass_index)),
            RunTag("farm.repeats", str(repeats))]
    if merged.reason:
        tags.append(RunTag("farm.reason", merged.reason[:5000]))
    for i in range(0, len(metrics), 900):  # MLflow takes at most 1000 metrics per batch
        c.log_batch(run_id, metrics=metrics[i:i + 900], tags=tags if i == 0 else [])
    if not metrics:
        c.log_batch(run_id, tags=tags)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "result.json").write_text(merged.model_dump_json(indent=1))
        c.log_artifacts(run_id, tmp)
    if artifacts_dir and Path(artifacts_dir).is_dir():
        c.log_artifacts(run_id, str(artifacts_dir), f"files/pass-{pass_index}")
    end = int((merged.finished_at or time.time()) * 1000)
    c.set_terminated(run_id, status="FINISHED" if merged.status == Status.ok else "FAILED", end_time=end)
