"""The flat records' models (pure): a run's flags compared as sets (`flag_set`, `config_key`), what a
profile asked for (`ProfileInfo`), where a number came from (`Provenance`), one benchmark run
(`RunRecord`), a run's deciding number (`deciding_value`) and `Results`, selection's and the
report's one input. farm/analysis/records.py says what they are for, and every public name here
is importable from there."""

from __future__ import annotations

import json
from typing import Any, Literal, Mapping

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, field_validator

from farm.strict import Strict

from farm.analysis.energy import RunEnergy, run_energy
from farm.analysis.limits import EffectiveLimits
from farm.analysis.quality_verdicts import TrialQuality
from farm.analysis.machine_models import GpuSamples, MachineFingerprint
from farm.analysis.results import Status
from farm.engines.base import render_flags
from farm.study.spec import CapacitySpec

_Strict = Strict  # farm/strict.py: the one strict base


# --------------------------------------------------------------------------------------
# flags


def canonical_flag(flag: str) -> str:
    """One flag in the form used to compare flag sets: JSON values with sorted keys, no spaces.

    `--speculative-config={"num_speculative_tokens":4,"method":"mtp"}` and the same config
    written in another key order start the same server, so they must compare equal.
    """
    name, sep, value = flag.strip().lstrip("-").partition("=")
    if not sep:
        return f"--{name}"
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if isinstance(parsed, (dict, list)):
        value = json.dumps(parsed, sort_keys=True, separators=(",", ":"))
    return f"--{name}={value}"


Flags = Mapping[str, Any]


def flag_set(flags: Flags) -> frozenset[str]:
    """Flags compare as sets of what the engine is given: the order they were written in never
    matters, nor whether a number was written as one (`4`) or read from a CLI string (`"4"`)."""
    return frozenset(canonical_flag(f) for f in render_flags(flags))


ConfigKey = tuple[str, str, frozenset]


def config_key(engine: str, model: str, flags: Flags) -> ConfigKey:
    """What defines the server under test: two runs with the same key are the same trial."""
    return (engine, model, flag_set(flags))


# --------------------------------------------------------------------------------------
# models


class ProfileInfo(_Strict):
    """What one benchmark profile asked for, as far as judging its runs needs to know."""

    total_requests: int = Field(gt=0, description="Requests one run of this profile sends; the denominator of the success rate.")
    dataset: str | None = Field(default=None, description="Dataset name or kind (ShareGPT file, 'random', 'synthetic').")
    input_tokens: int | None = Field(default=None, gt=0, description="Prompt length of synthetic/random data.")
    output_tokens: int | None = Field(
        default=None, gt=0, description="Fixed output length of synthetic/random data; unset for datasets of natural lengths."
    )
    request_rate: float | None = Field(default=None, gt=0, description="Constant request rate (req/s).")
    max_concurrency: int | None = Field(default=None, gt=0, description="Most requests in flight at once.")
    seed: int | None = Field(default=None, description="Random seed of the data generator.")
    description: str | None = Field(default=None, description="Free text.")
    capacity: CapacitySpec | None = Field(
        default=None, description="A capacity profile's load search; its runs are loads of it, not repeats.")


class Provenance(_Strict):
    """Where a number came from: without it a throughput cannot be compared with another one."""

    engine_version: StrictStr | None = Field(default=None, description="Engine version the run measured.")
    client_version: StrictStr | None = Field(default=None, description="Benchmark client and version (guidellm X).")
    gpu: StrictStr | None = Field(default=None, description="GPU model the engine ran on, as the driver names it.")
    gpus: StrictInt | None = Field(default=None, ge=0, description="GPUs the engine held.")
    weights: Literal["real", "dummy"] | None = Field(
        default=None, description="real: a checkpoint; dummy: the architecture with random weights.")
    engine_start_s: StrictFloat | None = Field(default=None, ge=0, description="Seconds from launch to ready.")
    engine_start_cold: StrictBool | None = Field(
        default=None, description="Whether the engine compiled from scratch (no compile cache on the node).")
    started_at: StrictStr | None = Field(default=None, description="When the run started (UTC, ISO 8601).")
    # Where a trial's GPU time went (farm/analysis/gpu_time.py): its whole wall time in the actor,
    # its warm-up runs, and this run's wall time (the client's start and report included).
    trial_wall_s: StrictFloat | None = Field(default=None, ge=0, description="The trial's wall time, start to stop.")
    warmup_s: StrictFloat | None = Field(default=None, ge=0, description="The trial's warm-up runs, in all.")
    run_wall_s: StrictFloat | None = Field(default=None, ge=0, description="This run's wall time.")
    # The engine's start, phase by phase from its own log (farm/analysis/start_phases.py).
    start_phases: dict[str, StrictFloat] | None = Field(
        default=None, description="Seconds of the start's phases (weight_load, compilation, kernel_profiling, "
        "cuda_graphs, other) where the engine's log names them.")
    start_cache: Literal["cold", "warm"] | None = Field(
        default=None, description="Whether the start compiled (cold) or loaded an earlier start's compile cache (warm).")
    start_cache_unusable: StrictStr | None = Field(
        default=None, description="Why the engine could not load the compile cache it found, in its log's words: "
        "the start compiled again (cold).")
    moe_config: StrictStr | None = Field(
        default=None, description="Which fused-MoE kernel config the start ran, from the engine's log "
        "(farm/engines/moe_config.py): 'default: FILE' (none tuned for this shape and GPU), 'tuned: FILE from "
        "PATH', or 'partly tuned: ...'; none where the log said neither.")
    engine_start_pass: StrictInt | None = Field(
        default=None, ge=1, description="Which of the trial's engine starts served this run: its pass or rung "
        "(1 the first). A trial started again for a later pass held its GPUs for each start.")
    # The machine and what its GPUs did (actors/machine.py): runs of one key ran on one machine.
    machine_key: StrictStr | None = Field(default=None, description="The machine the run ran on "
                                          "(MachineFingerprint.key); none: not recorded.")
    machine: MachineFingerprint | None = Field(
        default=None, description="That machine's fingerprint (GPU, driver, CUDA, kernel, CPU, host hash), where the "
        "trial recorded it for this run's machine.")
    gpu_samples: GpuSamples | None = Field(
        default=None, description="The GPUs' SM clock, temperature and power over the run's window, or why not measured.")


class RunRecord(_Strict):
    """One benchmark run: one trial (engine, model, flag set) on one profile, one repeat."""

    id: str = Field(description="Run id, unique within its results.")
    trial: str = Field(description="Trial id: equal for every run of the same engine, model and flag set.")
    name: str | None = Field(default=None, description="Human name of the trial (a seed step), if any.")
    engine: str = Field(description="Engine adapter name.")
    model: str = Field(description="Model id or path the engine served.")
    flags: dict[str, Any] = Field(
        description="Every engine flag by name, secrets masked, valued as the command line gives it: true for a bare "
        "`--name`, a mapping or list for a JSON value, the text of any other value.")
    node_control_of: str | None = Field(
        default=None, description="Set for a node control: the trial whose configuration this run repeats on `node` (never ranked).")
    profile: str = Field(description="Benchmark profile of this run.")
    repeat: int = Field(default=0, ge=0, description="Repeat number of this trial on this profile.")
    status: Status = Field(default=Status.ok, description="Outcome of the run; metrics are only trusted when `ok`.")
    reason: str | None = Field(default=None, description="Why the run did not succeed, if it did not.")
    load: float | None = Field(default=None, gt=0, description="A capacity profile's run: the load it ran at.")
    metrics: dict[str, float] = Field(default_factory=dict, description="Metrics named as in seed-results.json.")
    total_requests: int | None = Field(default=None, description="Requests its profile asked for.")
    node: str | None = Field(default=None, description="Node the run ran on, if known.")
    command: str | None = Field(default=None, description="The serve command, when the source recorded one.")
    provenance: Provenance | None = Field(default=None, description="Versions, GPU, weights and engine start.")
    limits: EffectiveLimits | None = Field(
        default=None, description="The limits the engine ran under, from its log (farm/analysis/limits.py).")

    @field_validator("flags")
    @classmethod
    def _as_the_command_line_gives_them(cls, flags: dict[str, Any]) -> dict[str, Any]:
        # One form whatever the source: a sweep's 32768 and a results file's "32768" are one value
        # (and a record survives a results file unchanged); false or unset is no flag at all.
        return {k: v if v is True or isinstance(v, (dict, list)) else str(v)
                for k, v in flags.items() if v is not None and v is not False}

    @property
    def dummy_weights(self) -> bool:
        return self.provenance is not None and self.provenance.weights == "dummy"

    @property
    def label(self) -> str:
        return self.name or self.trial

    @property
    def key(self) -> ConfigKey:
        return config_key(self.engine, self.model, self.flags)

    @property
    def cli_flags(self) -> list[str]:
        """The flags as the engine's command line writes them (`--name=value`, `--name`)."""
        return render_flags(self.flags)

    @property
    def measured(self) -> bool:
        """An ok run with a throughput: failed runs never contribute a number."""
        return self.status == Status.ok and "total_tps" in self.metrics

    def metric(self, name: str) -> float | None:
        if name == "tps_from_totals":
            return self.tps_from_totals
        return self.metrics.get(name)

    @property
    def success_rate(self) -> float | None:
        """Successful requests over the requests its profile asked for (not over those that ended).

        farm's own runs carry the rate their parser computed (it also counts requests served after
        guidellm's measurement window); a results file's runs are computed here."""
        if self.metrics.get("success_rate") is not None:
            return self.metrics["success_rate"]
        ok = self.metrics.get("successful_requests")
        if ok is not None and self.total_requests:
            return ok / self.total_requests
        return self.metrics.get("success_rate")

    @property
    def tps_from_totals(self) -> float | None:
        """(input + output tokens of successful requests) / benchmark duration."""
        m = self.metrics
        try:
            duration = m["duration_s"]
            tokens = m["total_input_tokens"] + m["total_output_tokens"]
        except KeyError:
            return None
        return tokens / duration if duration > 0 else None

    @property
    def output_tokens_per_request(self) -> float | None:
        ok, out = self.metrics.get("successful_requests"), self.metrics.get("total_output_tokens")
        return out / ok if ok and out is not None else None

    @property
    def energy(self) -> RunEnergy:
        """Joules, watts and tokens per joule over the run's window, or why not measured (farm/analysis/energy.py)."""
        if not self.measured:
            return RunEnergy(measured=False, reason=f"the run did not end ok ({self.status.value})")
        prov = self.provenance
        return run_energy(prov.gpu_samples if prov else None, duration_s=self.metrics.get("duration_s"),
                          input_tokens=self.metrics.get("total_input_tokens"),
                          output_tokens=self.metrics.get("total_output_tokens"), gpus=prov.gpus if prov else None)


# The throughputs a study may decide by (farm/analysis/definitions.py): the seed's totals-based rate, or
# the rate while the client held its full concurrency (farm/analysis/steady.py).
DecidingMetric = Literal["total_tps", "steady_tps"]
DECIDING_METRICS: tuple[str, ...] = ("total_tps", "steady_tps")


def deciding_value(rec: RunRecord, metric: str = "total_tps") -> float | None:
    """The number that decides for one run under `metric` (a `Results.deciding_metric`): None where the
    run has none (a failed run; a run without a steady-state window, under steady_tps). Never the
    other metric in its place: a run is ranked on one number or not at all."""
    if not rec.measured:
        return None
    return rec.metric(metric)


class Results(_Strict):
    """Every run of one study or sweep, with the profiles they ran."""

    source: str = Field(description="Where the runs came from (a file path or a sweep id), for messages.")
    profiles: dict[str, ProfileInfo] = Field(description="Profile name -> what it asked for.")
    records: list[RunRecord] = Field(description="One entry per benchmark run.")
    primary_profile: str | None = Field(default=None, description="Profile the source says selection ranks on, if any.")
    study: str | None = Field(default=None, description="Study name, when the runs come from a farm sweep.")
    grid: str | None = Field(default=None, description="Grid name, when the runs come from a farm sweep.")
    sweep_id: str | None = Field(default=None, description="Sweep id, when the runs come from a farm sweep.")
    sweeps: list[str] = Field(default_factory=list,
                              description="Every sweep the runs come from, when several are reported as one.")
    engine_versions: dict[str, str] = Field(default_factory=dict, description="Engine -> version string.")
    deciding_metric: DecidingMetric = Field(
        default="total_tps", description="The throughput that ranks and decides (the study's `deciding_metric`): "
        "selection reads each run's through `deciding_value`.")
    quality: dict[str, TrialQuality] = Field(
        default_factory=dict, description="Trial id -> its line of the quality gate (farm/analysis/quality_verdicts.py): "
        "a trial significantly worse than its reference is never recommended.")

    def profiles_with_runs(self) -> list[str]:
        seen = {r.profile for r in self.records}
        return [p for p in self.profiles if p in seen]

    def trial_records(self, trial: str) -> list[RunRecord]:
        return [r for r in self.records if r.trial == trial]
