"""A trial's child run's metrics and machine tags (names in farm/store/schema.py): each profile's
mean over its runs and each run at step = its repeat, a capacity search's runs as steps by load,
the GPUs' sampled clocks, power and energy, and the quality gate's answers.
`farm.store.tracking.log_trial` writes them."""

from __future__ import annotations

import statistics
import time

from mlflow.entities import Metric

from farm.analysis.energy import run_energy
from farm.analysis.results import Status, TrialResult
from farm.store import schema as S


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
