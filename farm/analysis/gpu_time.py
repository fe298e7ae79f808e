"""Where a sweep's GPU time went: starting engines, warming them up, measuring, failing, and the
rest (farm's own: stopping the engine, the version probe, preparing data, logging).

A trial holds its GPUs from its start in the actor to its end, so each trial's wall time is split
into phases from its records' provenance (`trial_wall_s`, `engine_start_s`, `warmup_s`, each run's
`run_wall_s`), and GPU time is that times the GPUs it held. Runs that did not end `ok`, and every
phase of a trial that never got a run `ok`, count as failing; a trial not measured by design
(`same_server`: started to read its log, then stopped) counts as a start and farm's own. A results
file without these fields (the seed's, or one written before they existed) gives no figures:
nothing is filled in.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from farm.analysis.records import Provenance, Results, RunRecord
from farm.analysis.outcome import NOT_MEASURED
from farm.analysis.results import Status

PHASES = ("starting", "warming_up", "measuring", "failing", "other")


class PhaseSeconds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    starting: float = 0.0
    warming_up: float = 0.0
    measuring: float = 0.0
    failing: float = 0.0
    other: float = Field(default=0.0, description="The trial's wall time not in another phase: farm's own cost.")

    @property
    def total(self) -> float:
        return sum(getattr(self, p) for p in PHASES)

    def add(self, other: PhaseSeconds, factor: float = 1.0) -> None:
        for p in PHASES:
            setattr(self, p, getattr(self, p) + factor * getattr(other, p))


class TrialTime(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trial: str
    label: str
    gpus: int
    seconds: PhaseSeconds


class GpuTime(BaseModel):
    """Seconds by phase, per trial and in all: `trial_seconds` counts each trial once (a slot of
    the sweep), `gpu_seconds` counts it once per GPU it held (0 for CPU trials)."""

    model_config = ConfigDict(extra="forbid")

    trials: list[TrialTime]
    trial_seconds: PhaseSeconds
    gpu_seconds: PhaseSeconds
    start_phases: dict[str, float] = Field(
        default_factory=dict, description="Seconds of the trials' engine starts by phase, summed (each start of each trial, "
        "from the engines' logs: farm/analysis/start_phases.py); empty where no log named them.")
    starts: dict[str, list[float]] = Field(
        default_factory=dict, description="cold / warm -> each such start's seconds from launch to ready.")


def _starts(records: list[RunRecord]) -> list[Provenance]:
    """The provenance of each engine start that served one of the trial's runs, once per start: a
    trial started again for a later pass or rung held its GPUs for every start."""
    by_start: dict[int, Provenance] = {}
    for r in records:
        if r.provenance is not None and r.provenance.engine_start_s is not None:
            by_start.setdefault(r.provenance.engine_start_pass or 1, r.provenance)
    return list(by_start.values())


def _phases(records: list[RunRecord]) -> PhaseSeconds | None:
    prov = records[0].provenance
    if prov is None or prov.trial_wall_s is None:
        return None
    any_ok = any(r.status == Status.ok for r in records)
    runs_ok = sum(r.provenance.run_wall_s or 0.0 for r in records if r.provenance and r.status == Status.ok)
    runs_failed = sum(r.provenance.run_wall_s or 0.0 for r in records if r.provenance and r.status != Status.ok)
    start, warm = sum(p.engine_start_s for p in _starts(records)), prov.warmup_s or 0.0
    other = max(0.0, prov.trial_wall_s - start - warm - runs_ok - runs_failed)
    if not any_ok and records[0].status in NOT_MEASURED:
        # started only to read its log (same_server): a start and farm's stop, not a failure
        return PhaseSeconds(starting=min(start, prov.trial_wall_s), other=max(0.0, prov.trial_wall_s - start))
    if not any_ok:  # the whole trial bought no measurement
        return PhaseSeconds(failing=prov.trial_wall_s)
    return PhaseSeconds(starting=start, warming_up=warm, measuring=runs_ok, failing=runs_failed, other=other)


def gpu_time(results: Results) -> GpuTime | None:
    """GPU time by phase of a sweep's results; None when no record says how long its trial took."""
    by_trial: dict[str, list[RunRecord]] = {}
    for rec in results.records:
        by_trial.setdefault(rec.trial, []).append(rec)
    trials, slots, gpus = [], PhaseSeconds(), PhaseSeconds()
    start_split: dict[str, float] = {}
    starts: dict[str, list[float]] = {}
    for trial, records in by_trial.items():
        phases = _phases(records)
        if phases is None:
            continue
        n = records[0].provenance.gpus or 0
        trials.append(TrialTime(trial=trial, label=records[0].label, gpus=n, seconds=phases))
        slots.add(phases)
        gpus.add(phases, n)
        for prov in _starts(records):
            for phase, seconds in (prov.start_phases or {}).items():
                start_split[phase] = start_split.get(phase, 0.0) + seconds
            if prov.start_cache:
                starts.setdefault(prov.start_cache, []).append(prov.engine_start_s)
    if not trials:
        return None
    return GpuTime(trials=trials, trial_seconds=slots, gpu_seconds=gpus, start_phases=start_split, starts=starts)
