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
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from pydantic import ValidationError

from farm.engines import get_engine
from farm.errors import UserError, key_path
from farm.inputs import env_tracking_uri
from farm.analysis.accelerator import gpu_models
from farm.analysis.energy import run_energy
from farm.analysis.limits import effective_limits, overrides_text
from farm.analysis.outcome import FINISHED
from farm.analysis.results import Status, TrialResult
from farm.secrets import redact_study, redact_trial
from farm.store import location
from farm.store import schema as S
from farm.study.spec import Study
from farm.study.trial import Trial

# Progress bars for every artifact download would drown the sweep's own output.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def default_tracking_uri() -> str:
    """MLflow's own default: a SQLite store in the working directory, no server needed
    (MLFLOW_TRACKING_URI first, checked where farm reads its inputs)."""
    return env_tracking_uri() or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def client(uri: str) -> MlflowClient:
    return MlflowClient(tracking_uri=uri)


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


def driver_beat(uri: str, sweep_id: str, *, start: bool = False, claim: dict[str, str] | None = None) -> None:
    """The driver's heartbeat on its sweep's run (and, at `start`, where the driver runs, with the
    `claim` of a new sweep's lease, farm/store/lease.py). A missed beat is harmless (six are missed
    before the sweep is taken for interrupted, or its lease for expired)."""
    import socket

    tags = [RunTag(S.HEARTBEAT_TAG, f"{time.time():.0f}")]
    if start:
        tags += [RunTag(S.DRIVER_TAG, f"{socket.gethostname()}:{os.getpid()}"), RunTag(S.DRIVER_PID_NS_TAG, pid_namespace())]
        tags += [RunTag(S.LEASE_TAG, (claim or {})[S.LEASE_TAG])] if claim else []
    try:
        client(uri).log_batch(sweep_id, tags=tags)
    except Exception:  # a busy or briefly unreachable store: the next beat tries again
        if start:
            raise


def write_tags(uri: str, run_id: str, tags: dict[str, str]) -> None:
    """Tags on a run, in one write (one transaction of the store)."""
    client(uri).log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])


class Heartbeat:
    """Beats every `S.DRIVER_HEARTBEAT_S` in a daemon thread while a driver runs its sweep, until
    `finish_sweep` ends the sweep (its report included) or the driver stops it on an error.

    The beats renew the driver's lease on its sweep (farm/store/lease.py: taken before a resumed
    sweep is read; a new sweep's is claimed with the first beat). Each beat first checks the lease
    is still this driver's: one taken by another driver (this one stalled past its expiry) ends
    the beats and interrupts the driver (`on_lost`; the main thread's KeyboardInterrupt by
    default), whose trials stop; `finish_sweep` then writes nothing and says who holds it."""

    def __init__(self, uri: str, sweep_id: str, on_lost=None, *, lease=None):
        """`lease`: farm/store/lease.py (the driver hands it in: the lease reads and writes through
        this module, which therefore does not import it); None: beats without a lease."""
        import _thread

        self.uri, self.sweep_id, self.lost, self.lease = uri, sweep_id, None, lease
        main = threading.current_thread() is threading.main_thread()
        self._on_lost = on_lost or (_thread.interrupt_main if main else (lambda: None))
        claim = None if lease is None or lease.holds(sweep_id) else lease.claim_new(uri, sweep_id)
        driver_beat(uri, sweep_id, start=True, claim=claim)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(uri, sweep_id), name="farm-heartbeat", daemon=True)
        self._thread.start()
        _BEATING[sweep_id] = self

    def _run(self, uri: str, sweep_id: str) -> None:
        while not self._stop.wait(S.DRIVER_HEARTBEAT_S):
            self.beat()

    def beat(self) -> None:
        """One beat: the lease checked, then renewed."""
        if self.lease is not None and (lost := self.lease.verify(self.uri, self.sweep_id)) is not None:
            self.lost = lost
            self._stop.set()
            self._on_lost()
            return
        driver_beat(self.uri, self.sweep_id)

    def check(self) -> None:
        """The lease checked now, between beats: raises `LeaseLost` where another driver took it
        since the last beat, so that a displaced driver starts no trial in the up to
        `S.DRIVER_HEARTBEAT_S` before its next beat would have found it out."""
        if self.lost is None and self.lease is not None:
            self.lost = self.lease.verify(self.uri, self.sweep_id)
        if self.lost is not None:
            self._stop.set()
            raise LeaseLost(self.lost)

    def stop(self, release: bool = True) -> None:
        """The beats end; the lease is let go unless `release` is False (`finish_sweep` lets it go
        once the sweep's end is stored)."""
        self._stop.set()
        if self._thread is not threading.current_thread():  # not from its own beat
            self._thread.join(timeout=5)
        if _BEATING.get(self.sweep_id) is self:
            del _BEATING[self.sweep_id]
        if release and self.lease is not None:
            self.lease.release(self.uri, self.sweep_id)


_BEATING: dict[str, Heartbeat] = {}  # sweep id -> its driver's heartbeat, in this process


class LeaseLost(KeyboardInterrupt):
    """This driver's lease on its sweep was taken by another driver: it stops as an interrupted
    driver does (its trials stopped; `finish_sweep` then writes nothing and says who holds it)."""


def check_lease(sweep_id: str) -> None:
    """Before a trial starts: raises `LeaseLost` where this process's driver of the sweep lost its
    lease (`Heartbeat.check`); nothing where it holds it, or beats no lease here."""
    if (beat := _BEATING.get(sweep_id)) is not None:
        beat.check()


def beating(sweep_id: str) -> bool:
    """Whether this process's driver of the sweep beats (its sweep not yet ended)."""
    return sweep_id in _BEATING


def pid_namespace() -> str:
    """This process's PID namespace ("" where /proc does not say)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def driver_gone(tags: dict[str, str], now: float, host: str, alive, namespace: str = "") -> str | None:
    """Why a sweep's run still "running" has no driver any more, or None while it may have one.
    `host`, `namespace`: this machine's name and PID namespace (a driver's pid is asked only
    within both); `alive(pid)`: whether a process here is alive. Pure: a run stored before drivers
    beat (no heartbeat) is never judged."""
    if tags.get(S.STATUS_TAG) != S.SWEEP_RUNNING or S.HEARTBEAT_TAG not in tags:
        return None
    try:
        beat = float(tags[S.HEARTBEAT_TAG])
    except ValueError:
        return None
    driver = tags.get(S.DRIVER_TAG, "")
    where, _, pid = driver.rpartition(":")
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(beat))
    same_space = tags.get(S.DRIVER_PID_NS_TAG, "") == namespace
    if where == host and same_space and pid.isdigit() and not alive(int(pid)):
        return f"its driver (process {pid} on {host}) is gone; last heartbeat {since}"
    if now - beat > S.DRIVER_GONE_S:
        return (f"its driver ({driver or 'unknown'}) sent no heartbeat for {now - beat:,.0f} s "
                f"(since {since}; one every {S.DRIVER_HEARTBEAT_S:g} s while it runs)")
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    try:  # a zombie (killed, not yet reaped by its parent) is gone
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def interruption(uri: str, run) -> tuple[str, str] | None:
    """(why, the command the sweep ran) for a sweep interrupted without its driver marking it: one
    marked so earlier, or one still "running" whose driver is gone, which is marked here (status
    tag `interrupted`, MLflow status KILLED, the reason), so that the MLflow UI shows it too. A store
    that cannot be written (read-only media) is not written: the answer is the same."""
    import socket

    tags = run.data.tags
    command = run.data.params.get("command", "")
    if tags.get(S.STATUS_TAG) == S.SWEEP_INTERRUPTED:
        return tags.get(S.INTERRUPTED_TAG, "its driver is gone"), command
    why = driver_gone(tags, time.time(), socket.gethostname(), _pid_alive, pid_namespace())
    if why is None:
        return None
    try:
        c = client(uri)
        c.log_batch(run.info.run_id, tags=[RunTag(S.STATUS_TAG, S.SWEEP_INTERRUPTED), RunTag(S.INTERRUPTED_TAG, why)])
        c.set_terminated(run.info.run_id, status=S.SWEEP_END_STATUS[S.SWEEP_INTERRUPTED])
    except Exception:  # a store this command may only read: reported as interrupted all the same
        pass
    return why, command


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


def quality_run_metrics(result: TrialResult) -> list[Metric]:
    """A trial's own answers to the quality gate: accuracy, items, correct, seconds (none where it failed)."""
    q = result.quality
    if q is None or q.accuracy is None:
        return []
    now = int(time.time() * 1000)
    values = dict(zip(S.QUALITY_RUN_METRICS, (q.accuracy, q.items, q.correct, q.seconds)))
    return [Metric(S.quality_metric(k), float(v), now, 0) for k, v in values.items() if v is not None]


def _mean(values: list[float]) -> float:
    return statistics.fmean(values)


def trial_metrics(result: TrialResult) -> list[Metric]:
    now = int(time.time() * 1000)
    out: list[Metric] = []
    for profile in result.trial.profiles:
        runs = [r for r in result.runs_of(profile) if r.metrics is not None]
        if any(r.load is not None for r in runs):
            out += _search_metrics(profile, runs, now)
            continue
        for name in S.METRICS:
            values = [getattr(r.metrics, name) for r in runs if getattr(r.metrics, name) is not None]
            if not values:
                continue
            out.append(Metric(S.metric_name(profile, name), _mean(values), now, 0))
            if len(values) > 1:
                out += [Metric(S.run_metric_name(profile, name), v, now, r.repeat)
                        for r, v in zip(runs, values)]
        out += _gpu_metrics(profile, runs, now)
        out += _energy_metrics(profile, runs, now)
    return out


def _energy_metrics(profile: str, runs: list, now: int) -> list[Metric]:
    """Each run's joules, watts and tokens per joule where its GPUs' power was sampled (farm/analysis/energy.py):
    the mean over the trial's runs, each run at step = its repeat when there are several."""
    energies = [(r, run_energy(r.gpu, duration_s=r.metrics.duration_s, input_tokens=r.metrics.total_input_tokens,
                               output_tokens=r.metrics.total_output_tokens)) for r in runs if r.status == Status.ok]
    fields = dict(zip(S.ENERGY_METRICS, ("joules", "mean_w", "peak_w", "output_tokens_per_j", "total_tokens_per_j")))
    out: list[Metric] = []
    for name, field in fields.items():
        pairs = [(r, v) for r, e in energies if e.measured and (v := getattr(e, field)) is not None]
        if not pairs:
            continue
        out.append(Metric(S.metric_name(profile, name), _mean([v for _, v in pairs]), now, 0))
        if len(pairs) > 1:
            out += [Metric(S.run_metric_name(profile, name), v, now, r.repeat) for r, v in pairs]
    return out


def _gpu_metrics(profile: str, runs: list, now: int) -> list[Metric]:
    """What the GPUs did over each run (actors/machine.py), where they were sampled: the mean over
    the trial's runs, and each run at step = its repeat when there are several."""
    out: list[Metric] = []
    for quantity in S.GPU_QUANTITIES:
        for stat in S.GPU_STATS:
            pairs = [(r, getattr(spread, stat)) for r in runs
                     if r.gpu is not None and r.gpu.measured and (spread := getattr(r.gpu, quantity)) is not None]
            if not pairs:
                continue
            name = S.gpu_metric(quantity, stat)
            out.append(Metric(S.metric_name(profile, name), _mean([v for _, v in pairs]), now, 0))
            if len(pairs) > 1:
                out += [Metric(S.run_metric_name(profile, name), v, now, r.repeat) for r, v in pairs]
    return out


def machine_tags(result: TrialResult) -> dict[str, str]:
    """The trial's machine as tags (its key, each fingerprint field), and why its runs' GPUs were not
    sampled where none was."""
    tags: dict[str, str] = {}
    if result.machine is not None:
        tags[S.MACHINE_TAG] = result.machine.key
        tags.update({S.machine_tag(k): str(v) for k, v in result.machine.model_dump(exclude_none=True).items()})
    why = sorted({r.gpu.reason for r in result.runs if r.gpu is not None and not r.gpu.measured and r.gpu.reason})
    if why:
        tags[S.GPU_NOT_MEASURED_TAG] = "not measured: " + "; ".join(why)
    return tags


def _search_metrics(profile: str, runs: list, now: int) -> list[Metric]:
    """A capacity search's runs as steps, lowest load first: step k is the k-th load, so MLflow's
    charts of `<profile>/<metric>` draw the curve (`<profile>/load` gives each step's load)."""
    out: list[Metric] = []
    for step, run in enumerate(sorted((r for r in runs if r.load is not None), key=lambda r: r.load)):
        out.append(Metric(S.metric_name(profile, S.LOAD_METRIC), run.load, now, step))
        out += [Metric(S.metric_name(profile, name), value, now, step) for name in S.METRICS
                if (value := getattr(run.metrics, name)) is not None]
    return out


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
