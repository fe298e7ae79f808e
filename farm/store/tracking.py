"""MLflow, writing: parent run = sweep, child run = trial (names in farm/store/schema.py).

Child runs are written by the actor that ran the trial, as soon as it finishes (artifacts go
over HTTP to a shared server on a cluster), so every finished trial is in MLflow even if the
driver dies later; the driver writes only the children of trials whose actor could not.
Each child carries the full `TrialResult` as `result.json`, from which `farm report` and
`--resume` rebuild the sweep. The raw reads the driver needs (`load_results`, `trial_runs`)
are here too; commands that only read go through `farm.store.mlflow_store.MlflowStore`.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from pydantic import ValidationError

from farm.engines import get_engine
from farm.errors import UserError, key_path
from farm.analysis.accelerator import gpu_models
from farm.analysis.limits import effective_limits, overrides_text
from farm.analysis.outcome import FINISHED
from farm.analysis.results import Status, TrialResult
from farm.secrets import redact_study, redact_trial
from farm.store import location
from farm.store import schema as S
from farm.study.spec import Study
from farm.study.trial import Trial
# The client, the driver's heartbeat and a trial's metrics live apart (farm/store/mlflow_client.py,
# heartbeat.py, trial_metrics.py); their names stay importable from here, where callers take them.
from farm.store.heartbeat import (
    _BEATING as _BEATING, Heartbeat as Heartbeat, LeaseLost as LeaseLost, _pid_alive as _pid_alive,
    beating as beating, check_lease as check_lease, driver_beat as driver_beat, driver_gone as driver_gone,
    interruption as interruption, pid_namespace as pid_namespace,
)
from farm.store.mlflow_client import client as client, default_tracking_uri as default_tracking_uri
from farm.store.trial_metrics import (
    _mean, machine_tags as machine_tags, quality_run_metrics as quality_run_metrics, trial_metrics as trial_metrics,
)

# Progress bars for every artifact download would drown the sweep's own output.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def experiment_id(uri: str, name: str) -> str:
    """The experiment's id, created where missing; MLflow is told it holds runs, not GenAI traces
    (`EXPERIMENT_KIND_TAG`), unless someone already chose its kind."""
    c = client(uri)
    exp = c.get_experiment_by_name(name)
    if exp is None:
        return c.create_experiment(name, tags={S.EXPERIMENT_KIND_TAG: S.EXPERIMENT_KIND_RUNS})
    if S.EXPERIMENT_KIND_TAG not in exp.tags:  # created by an earlier farm, or by hand
        c.set_experiment_tag(exp.experiment_id, S.EXPERIMENT_KIND_TAG, S.EXPERIMENT_KIND_RUNS)
    return exp.experiment_id


def start_sweep(uri: str, experiment: str, study: Study, grid: str, trials: list[Trial], *,
                command: str, repeats: int, claim: dict[str, str] | None = None) -> tuple[str, str]:
    """Create the parent run; returns (experiment id, sweep id = run id). `claim`: the driver's
    lease on it (farm/store/lease.py: `new_claim`), written in the run's creation."""
    c = client(uri)
    exp_id = experiment_id(uri, experiment)
    run = c.create_run(exp_id, run_name=S.sweep_run_name(study.name, grid, time.time()), tags={
        S.KIND_TAG: S.KIND_SWEEP, S.STUDY_TAG: study.name, S.GRID_TAG: grid, S.STATUS_TAG: S.SWEEP_RUNNING,
        **(claim or {}),
    })
    sweep_id = run.info.run_id
    values = {"study": study.name, "grid": grid, "trials": str(len(trials)),
              "profiles": ",".join(study.grid_profiles(grid)), "repeats": str(repeats),
              "primary_profile": study.grid_primary_profile(grid), "command": command[:S.COMMAND_PARAM_MAX_CHARS]}
    models = gpu_models(study, trials)  # `auto` resolved by the driver before this run exists
    c.log_batch(sweep_id, params=[Param(name, values[name]) for name in S.SWEEP_PARAMS],
                tags=[RunTag(S.SWEEP_TAG, sweep_id)] + ([RunTag(S.ACCELERATOR_TAG, ",".join(models))] if models else []))
    shown = [redact_trial(t, get_engine(t.engine).secret_flags(study.engines[t.engine])) for t in trials]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / S.STUDY_ARTIFACT).write_text(yaml.safe_dump(redact_study(study), sort_keys=False))
        (Path(tmp) / S.TRIALS_ARTIFACT).write_text(json.dumps([t.model_dump(mode="json") for t in shown], indent=1))
        c.log_artifacts(sweep_id, tmp, S.SWEEP_DIR)
    keep_reference(uri, sweep_id, study)
    keep_trials_view(uri, exp_id, sweep_id, study.grid_profiles(grid), study.grid_primary_profile(grid))
    return exp_id, sweep_id


def keep_trials_view(uri: str, exp_id: str, sweep_id: str, profiles: list[str], primary: str) -> None:
    """The sweep's trials as the MLflow UI opens them from farm's link (`schema.trials_view`): an
    experiment tag; a sweep resumed after this was added gets its view then."""
    c = client(uri)
    if S.trials_view_tag(sweep_id) not in c.get_experiment(exp_id).tags:
        c.set_experiment_tag(exp_id, S.trials_view_tag(sweep_id),
                             json.dumps(S.trials_view(sweep_id, list(profiles), primary), separators=(",", ":")))


def keep_reference(uri: str, sweep_id: str, study: Study) -> None:
    """The study's reference results, copied beside the sweep (a sweep resumed after this was
    added gets its copy then)."""
    ref = study.reference
    if ref is None or not Path(ref.results).is_file() or read_artifact(uri, sweep_id, S.REFERENCE_PATH) is not None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / S.REFERENCE_ARTIFACT
        copy.write_bytes(Path(ref.results).read_bytes())
        client(uri).log_artifact(sweep_id, str(copy), S.SWEEP_DIR)


def get_sweep(uri: str, sweep_id: str):
    """The parent run of a sweep, or None."""
    try:
        run = client(uri).get_run(sweep_id)
    except Exception:  # MLflow raises its own error type for an unknown id
        return None
    return run if run.data.tags.get(S.KIND_TAG) == S.KIND_SWEEP else None


def sweep_experiment_id(uri: str, sweep_id: str) -> str:
    """The experiment a sweep's run is in."""
    return client(uri).get_run(sweep_id).info.experiment_id


def preload(uri: str, sweep_id: str) -> None:
    """Read the sweep's run once, so that MLflow has imported itself and opened the store (a SQLite
    store's connection and schema check: ~3 s on 2 cores) before a trial's first write."""
    client(uri).get_run(sweep_id)


def reopen_sweep(uri: str, sweep_id: str) -> None:
    c = client(uri)
    c.update_run(sweep_id, status="RUNNING")
    c.set_tag(sweep_id, S.STATUS_TAG, S.SWEEP_RUNNING)


def write_tags(uri: str, run_id: str, tags: dict[str, str]) -> None:
    """Tags on a run, in one write (one transaction of the store)."""
    client(uri).log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])


def finish_sweep(uri: str, sweep_id: str, status: str, files: list[Path] | None = None) -> None:
    """status: 'finished', 'killed' or 'failed' (MLflow's run status follows). The driver's
    heartbeat ends here, and its lease (farm/store/lease.py) is let go once the sweep's end is
    stored; a driver that lost its lease writes nothing (the sweep is another driver's now)."""
    lease = None
    if (beat := _BEATING.get(sweep_id)) is not None:
        beat.stop(release=False)
        lease = beat.lease
        if (lost := beat.lost or (lease.verify(uri, sweep_id) if lease is not None else None)) is not None:
            if lease is not None:
                lease.release(uri, sweep_id)  # its own no longer: only forgotten here
            raise UserError(lost, key="--resume")
    c = client(uri)
    for path in files or []:
        if path.is_dir():
            c.log_artifacts(sweep_id, str(path), S.REPORT_DIR)
        elif path.is_file():  # the plots keep their folder: report.md links plots/<name>.png
            sub = f"{S.REPORT_DIR}/{S.REPORT_PLOTS}" if path.parent.name == S.REPORT_PLOTS else S.REPORT_DIR
            c.log_artifact(sweep_id, str(path), sub)
    c.set_tag(sweep_id, S.STATUS_TAG, status)
    c.set_terminated(sweep_id, status=S.SWEEP_END_STATUS.get(status, "FAILED"))
    if lease is not None:
        lease.release(uri, sweep_id)


def annotate_sweep(uri: str, sweep_id: str, *, note: str, metrics: dict[str, float] | None = None,
                   tags: dict[str, str] | None = None, trial_tags: dict[str, dict[str, str]] | None = None,
                   trial_costs: dict[str, dict[tuple[str, str], float]] | None = None,
                   quality: dict[str, dict[str, float]] | None = None) -> None:
    """The answer where the MLflow UI shows it: the parent run's description (`note`, markdown),
    its summary metrics and tags, and tags on the trials' child runs (trial id -> tags; the
    child run `load_results` reads for that trial), and their costs (trial id -> {(profile, one of
    COST_METRICS): dollars per million tokens}). Re-annotating (`farm report`, a resume)
    replaces what an earlier end wrote."""
    c = client(uri)
    now = int(time.time() * 1000)
    if len(note) > S.NOTE_MAX_CHARS:
        note = note[:S.NOTE_MAX_CHARS - 80].rsplit("\n", 1)[0] + f"\n\n(cut here: the whole report is {S.REPORT_DIR}/{S.REPORT_MARKDOWN})\n"
    run_tags = [RunTag(S.NOTE_TAG, note)] + [RunTag(k, v[:S.TAG_MAX_CHARS]) for k, v in (tags or {}).items()]
    c.log_batch(sweep_id, metrics=[Metric(k, float(v), now, 0) for k, v in (metrics or {}).items()], tags=run_tags)
    if trial_tags or trial_costs or quality:
        runs = trial_run_ids(uri, sweep_id)
        for trial, values in (trial_tags or {}).items():
            if trial in runs:
                c.log_batch(runs[trial], tags=[RunTag(k, v[:S.TAG_MAX_CHARS]) for k, v in values.items()])
        for trial, costs in (trial_costs or {}).items():
            if trial in runs and costs:
                c.log_batch(runs[trial], metrics=[Metric(S.metric_name(p, name), float(v), now, 0)
                                                  for (p, name), v in costs.items()])
        for trial, values in (quality or {}).items():
            if trial in runs and values:
                c.log_batch(runs[trial], metrics=[Metric(S.quality_metric(k), float(v), now, 0)
                                                  for k, v in values.items()])


def log_trial(uri: str, exp_id: str | None, sweep_id: str, result: TrialResult, artifacts_dir: Path | None) -> str:
    """One child run with params, tags, metrics and artifacts; returns its run id.

    The status tag is written last: a run that lacks it was cut off while logging (the actor
    or the server died) and counts as not finished; a failed upload removes its partial run.
    """
    c = client(uri)
    exp_id = exp_id or c.get_run(sweep_id).info.experiment_id
    trial = result.trial
    run = c.create_run(exp_id, run_name=trial.label, start_time=int((result.started_at or time.time()) * 1000), tags={
        S.PARENT_TAG: sweep_id, S.KIND_TAG: S.KIND_TRIAL, S.SWEEP_TAG: sweep_id, S.TRIAL_TAG: trial.id,
        S.ENGINE_TAG: trial.engine, S.NODE_TAG: result.node or "", S.NODE_ID_TAG: result.node_id or "",
        S.GPUS_TAG: ",".join(result.gpus), S.ENGINE_VERSION_TAG: result.engine_version or "",
        S.ATTEMPT_TAG: str(result.attempt),
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


def _param_value(value) -> str:
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def _log_trial_body(c: MlflowClient, run_id: str, result: TrialResult, artifacts_dir: Path | None) -> None:
    trial = result.trial
    values = {"engine": trial.engine, "model": trial.model, "trial_id": trial.id, "gpus": str(trial.gpus),
              "profiles": ",".join(trial.profiles), "name": trial.name}
    params = [Param(name, values[name]) for name in S.TRIAL_PARAMS if name != "name" or trial.name]
    params += [Param(S.flag_param(k), _param_value(v)) for k, v in trial.all_flags.items()]
    params += [Param(S.knob_param(k), _param_value(v)) for k, v in (trial.knobs or {}).items()]
    # The limits the engine ran under (its log), beside the knobs that asked, and the knobs it
    # overrode as a tag (farm/analysis/limits.py).
    limits = effective_limits(trial.engine, trial.knobs or {}, trial.all_flags, result.engine_reported)
    if limits is not None:
        params += [Param(S.limit_param(k), str(v)) for k, v in limits.model_dump(exclude_none=True).items()
                   if k != "knob_overridden"]
    cap = S.TAG_MAX_CHARS
    tags = []
    if limits is not None and limits.knob_overridden:
        tags.append(RunTag(S.KNOB_OVERRIDDEN_TAG, overrides_text(limits)[:cap]))
    if result.reason:
        tags.append(RunTag(S.REASON_TAG, result.reason[:cap]))
    if result.status != Status.ok and result.log_tail:
        # The engine's last words, readable in the run's overview without opening an artifact
        # (scrubbed of secrets by the actor; the whole log is under files/engine.log).
        tail_lines = "\n".join(result.log_tail.splitlines()[-S.LOG_TAIL_TAG_LINES:])
        tags.append(RunTag(S.LOG_TAIL_TAG, tail_lines[-cap:]))
    if result.previous_attempts:
        tags.append(RunTag(S.PREVIOUS_ATTEMPTS_TAG, "\n".join(result.previous_attempts)[:cap]))
    tags += [RunTag(k, v[:cap]) for k, v in machine_tags(result).items()]
    if result.quality is not None:
        params.append(Param(S.QUALITY_TASK_PARAM, result.quality.task[:500]))
    c.log_batch(run_id, metrics=trial_metrics(result) + quality_run_metrics(result), params=params, tags=tags)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / S.RESULT_ARTIFACT).write_text(result.model_dump_json(indent=1))
        (Path(tmp) / S.COMMAND_ARTIFACT).write_text(result.serve_command + "\n")
        if result.log_tail:
            (Path(tmp) / S.LOG_TAIL_ARTIFACT).write_text(result.log_tail + "\n")
        if result.quality is not None:  # item by item, so the pairing survives a resume and `farm report`
            (Path(tmp) / S.QUALITY_ARTIFACT).write_text(result.quality.model_dump_json(indent=1))
        c.log_artifacts(run_id, tmp)
    if artifacts_dir and Path(artifacts_dir).is_dir():
        c.log_artifacts(run_id, str(artifacts_dir), S.FILES_DIR)
    c.set_tag(run_id, S.STATUS_TAG, result.status.value)
    end = int((result.finished_at or time.time()) * 1000)
    c.set_terminated(run_id, status="FINISHED" if result.status == Status.ok else "FAILED", end_time=end)


def trial_runs(uri: str, sweep_id: str) -> list:
    """All child runs of a sweep."""
    c = client(uri)
    exp_id = c.get_run(sweep_id).info.experiment_id
    return c.search_runs([exp_id], filter_string=S.trials_of_sweep_filter(sweep_id), max_results=50000)


def drop_unfinished_runs(uri: str, sweep_id: str) -> list[str]:
    """Before a resume: delete (MLflow's soft delete) the child runs of trials that will run
    again (cut off while logging, lost, cancelled, or out of retries on a transient failure),
    so each trial id appears once among the sweep's runs. Returns the run ids deleted."""
    finished = {s.value for s in FINISHED}
    c = client(uri)
    dropped = []
    for run in trial_runs(uri, sweep_id):
        if run.data.tags.get(S.STATUS_TAG) not in finished:
            c.delete_run(run.info.run_id)
            dropped.append(run.info.run_id)
    return dropped


def read_artifact(uri: str, run_id: str, path: str, artifact_uri: str | None = None) -> bytes | None:
    """The bytes of one artifact of a run; None when it has none there.

    A local store's file is read where it lies: where the run recorded it, or beside the database
    when the store was moved from another machine (farm/store/location.py); that also skips
    download_artifacts' copy through a temporary directory (a quarter second a trial on 2 cores).
    A server's proxied store (`mlflow-artifacts:/...`) goes through the server."""
    c = client(uri)
    if artifact_uri is None:
        try:
            artifact_uri = c.get_run(run_id).info.artifact_uri or ""
        except Exception:  # MLflow's own error for an unknown run
            return None
    if location.local_path(artifact_uri) is not None:
        folder = location.artifact_dir(uri, artifact_uri)
        try:
            return (folder / path).read_bytes() if folder is not None else None
        except OSError:
            return None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            return Path(c.download_artifacts(run_id, path, tmp)).read_bytes()
        except Exception:  # MLflow raises its own, requests' and httpx's errors
            return None


def _result_bytes(c: MlflowClient, run, uri: str) -> bytes | None:
    """A child run's result.json; None for a run logged without one (older schema, interrupted upload)."""
    return read_artifact(uri, run.info.run_id, S.RESULT_ARTIFACT, run.info.artifact_uri or "")


def load_results(uri: str, sweep_id: str) -> list[TrialResult]:
    """Every trial result of a sweep, from the `result.json` artifacts (latest attempt wins).
    From a server, the downloads go several at once: a sweep of 1,000 trials is 1,000 of them."""
    c = client(uri)
    runs = sorted(trial_runs(uri, sweep_id), key=lambda r: r.info.start_time or 0)
    with ThreadPoolExecutor(8) as pool:
        contents = list(pool.map(lambda run: _result_bytes(c, run, uri), runs))
    by_trial: dict[str, TrialResult] = {}
    for run, raw in zip(runs, contents):
        if raw is None:
            continue
        try:
            result = TrialResult.model_validate_json(raw)
        except ValidationError as exc:  # stored by a farm with another result schema
            err = exc.errors()[0]
            raise UserError(f"does not fit this farm's result schema ({err['msg']})",
                            file=f"run {run.info.run_id}: {S.RESULT_ARTIFACT}", key=key_path(err["loc"]) or None) from None
        by_trial[result.trial.id] = result
    return sorted(by_trial.values(), key=lambda r: r.trial.index)


# --------------------------------------------------------------------------------------
# `--repeats auto`: a later pass appended to its trial's child run


def trial_run_ids(uri: str, sweep_id: str) -> dict[str, str]:
    """Trial id -> the child run `load_results` reads for it (the latest one with a result)."""
    out: dict[str, str] = {}
    for run in sorted(trial_runs(uri, sweep_id), key=lambda r: r.info.start_time or 0):
        trial = run.data.tags.get(S.TRIAL_TAG)
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
        for name in S.METRICS:
            values = [(r, getattr(r.metrics, name)) for r in runs if getattr(r.metrics, name) is not None]
            if not values:
                continue
            metrics.append(Metric(S.metric_name(profile, name), _mean([v for _, v in values]), now, pass_index - 1))
            metrics += [Metric(S.run_metric_name(profile, name), v, now, r.repeat) for r, v in values
                        if r.pass_index == pass_index]
    repeats = max((len(merged.runs_of(p)) for p in merged.trial.profiles), default=0)
    tags = [RunTag(S.STATUS_TAG, merged.status.value), RunTag(S.PASSES_TAG, str(pass_index)),
            RunTag(S.REPEATS_TAG, str(repeats))]
    if merged.reason:
        tags.append(RunTag(S.REASON_TAG, merged.reason[:S.TAG_MAX_CHARS]))
    step = S.METRICS_PER_BATCH
    for i in range(0, len(metrics), step):
        c.log_batch(run_id, metrics=metrics[i:i + step], tags=tags if i == 0 else [])
    if not metrics:
        c.log_batch(run_id, tags=tags)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / S.RESULT_ARTIFACT).write_text(merged.model_dump_json(indent=1))
        c.log_artifacts(run_id, tmp)
    if artifacts_dir and Path(artifacts_dir).is_dir():
        c.log_artifacts(run_id, str(artifacts_dir), S.pass_files_dir(pass_index))
    end = int((merged.finished_at or time.time()) * 1000)
    c.set_terminated(run_id, status="FINISHED" if merged.status == Status.ok else "FAILED", end_time=end)


# --------------------------------------------------------------------------------------
# Ray Jobs: which submission runs a sweep


def tag_submission(uri: str, sweep_id: str, submission_id: str) -> None:
    client(uri).set_tag(sweep_id, S.SUBMISSION_TAG, submission_id)


def sweep_of_submission(uri: str, submission_id: str) -> str | None:
    """The sweep a Ray Jobs submission started, if its parent run is in this store."""
    c = client(uri)
    runs = c.search_runs([e.experiment_id for e in c.search_experiments()],
                         filter_string=S.submission_filter(submission_id), max_results=1)
    return runs[0].info.run_id if runs else None
