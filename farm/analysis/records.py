"""Flat records of benchmark runs: the one input of selection and report, whatever their source.

A results file (the seed's `seed-results.json`, or one farm wrote after a sweep) and farm's own
`TrialResult`s both become a `Results`: the profiles that were run and one `RunRecord` per
benchmark run. Selection and report never look further back than this, so a report can be
recomputed at any time from stored results.

Runs of the same engine, model and flag set are one trial, whatever the file calls them: the
seed reports its baseline as `engine_vllm_default` on ShareGPT and as
`final_baseline_throughput` on the throughput profile, and both are the same server.

A record's flags are a mapping (name -> value, as the command line gives it); a results file writes
them as the CLI strings `--name=value` the seed's file uses, read into the mapping once, here.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Mapping

from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError,
                      field_validator)

from farm.strict import Strict

from farm.analysis.energy import RunEnergy, run_energy
from farm.analysis.limits import EffectiveLimits, effective_limits
from farm.analysis.quality_verdicts import TrialQuality, quality_from_results
from farm.analysis.results import GpuSamples, MachineFingerprint, ProfileRun, Status, TrialResult, migrate_tpot
from farm.analysis.start_phases import start_cache, start_phases
from farm.engines import get_engine
from farm.engines.base import parse_cli_flags, render_flags
from farm.errors import UserError, key_path
from farm.inputs import safe_name_problem
from farm.secrets import redact_flags
from farm.study.spec import CapacitySpec, EngineSpec, Study
from farm.study.trial import legacy_control_of

RESULTS_FORMAT_VERSION = 2  # 2: TPOT as the field means it (farm/analysis/definitions.py)

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


# --------------------------------------------------------------------------------------
# the results file (seed-results.json format)


class _FileRun(_Strict):
    id: StrictStr = Field(min_length=1)
    engine: StrictStr = Field(min_length=1)
    model: StrictStr = Field(min_length=1)
    flags: list[StrictStr]
    profile: StrictStr
    # Strict: a number written as a string is a mistake in the file, not something to guess at.
    metrics: dict[str, StrictFloat | None] = Field(default_factory=dict)
    trial: StrictStr | None = None
    name: StrictStr | None = None
    node_control_of: StrictStr | None = None
    repeat: StrictInt = Field(default=0, ge=0)
    load: StrictFloat | StrictInt | None = Field(default=None, gt=0)
    status: Status = Status.ok
    reason: StrictStr | None = None
    node: StrictStr | None = None
    command: StrictStr | None = None
    provenance: Provenance | None = None
    limits: EffectiveLimits | None = None
    # Derived, for a reader of the file: farm recomputes it from provenance.gpu_samples and the metrics.
    energy: RunEnergy | None = None
    # Annotations of the seed's file: where the run is in the seed document, and remarks.
    seed_line: StrictInt | None = None
    note: StrictStr | None = None

    @field_validator("flags")
    @classmethod
    def _cli_flags(cls, flags: list[str]) -> list[str]:
        seen: dict[str, int] = {}
        for i, flag in enumerate(flags):
            if not flag.startswith("--") or len(flag) < 3:
                raise ValueError(f"flags[{i}] {flag!r} is not a CLI flag like --name=value")
            name = flag[2:].partition("=")[0]
            if name in seen:  # one value per flag: which one the engine would take is its own business
                raise ValueError(f"flags[{i}] --{name} given twice (also flags[{seen[name]}])")
            seen[name] = i
        return flags


class _FileResults(BaseModel):
    # Results files carry free-form documentation at the top (the seed's: hardware, method,
    # published tables, notes); only the keys below are read, so the others are let through.
    model_config = ConfigDict(extra="ignore")

    profiles: dict[str, ProfileInfo]
    runs: list[_FileRun]
    source: StrictStr | None = None
    primary_profile: StrictStr | None = None
    study: StrictStr | None = None
    grid: StrictStr | None = None
    sweep_id: StrictStr | None = None
    sweeps: list[StrictStr] = Field(default_factory=list)
    engine_versions: dict[str, StrictStr] = Field(default_factory=dict)
    deciding_metric: DecidingMetric = "total_tps"
    schema_version: StrictInt | None = None

    @field_validator("profiles")
    @classmethod
    def _profile_names(cls, profiles: dict[str, ProfileInfo]) -> dict[str, ProfileInfo]:
        # A report's plots are named by profile (`capacity_<profile>.png` in --out): one safe path
        # component each, as a study's profiles (farm/inputs.py SAFE_NAME_RULE).
        for name in profiles:
            problem = safe_name_problem(name, "profile name")
            if problem:
                raise ValueError(problem)
        return profiles


_TYPE_WORDS = {
    "string_type": "expected a string",
    "int_type": "expected a whole number",
    "float_type": "expected a number",
    "list_type": "expected a list",
    "dict_type": "expected a mapping",
    "model_type": "expected a mapping",
    "missing": "required key missing",
    "extra_forbidden": "unknown key",
}


def _describe(err: dict) -> tuple[str, str]:
    # Unions report one error per member with the member type in the location; keep the user's keys.
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function-"))))
    if err["type"] in ("int_type", "float_type") and len(loc) >= 2 and loc[-2] == "metrics":
        return key_path(loc), f"expected a number, got {json.dumps(err.get('input'))}"
    if err["type"] == "enum":
        return key_path(loc), f"unknown value {json.dumps(err.get('input'))} (known: {err['ctx']['expected']})"
    reason = _TYPE_WORDS.get(err["type"]) or err["msg"].removeprefix("Value error, ")
    if err["type"] in ("string_type", "int_type", "float_type", "list_type", "dict_type", "model_type"):
        reason += f", got {json.dumps(err.get('input'))[:60]}"
    return key_path(loc), reason


def _validate_file(data: Any, shown: str) -> _FileResults:
    if not isinstance(data, dict):
        raise UserError("a results file must be a JSON object with `profiles` and `runs`", file=shown)
    try:
        return _FileResults.model_validate(data)
    except ValidationError as exc:
        key, reason = _describe(exc.errors()[0])
        raise UserError(reason, file=shown, key=key or None) from None


def _check_run(run: _FileRun, i: int, profiles: dict[str, ProfileInfo], shown: str) -> dict[str, float]:
    where = f"runs[{i}]"
    if run.profile not in profiles:
        raise UserError(f"unknown profile '{run.profile}' (the file defines: {', '.join(profiles) or 'none'})",
                        file=shown, key=f"{where}.profile")
    metrics = {k: float(v) for k, v in run.metrics.items() if v is not None}
    for name, value in metrics.items():
        if not math.isfinite(value) or value < 0:
            raise UserError(f"expected a finite number >= 0, got {value}", file=shown, key=f"{where}.metrics.{name}")
    if run.status == Status.ok:
        # An ok run is judged on these two; without them it can be neither ranked nor gated.
        for needed in ("successful_requests", "total_tps"):
            if needed not in metrics:
                raise UserError("required metric missing (the run's status is ok)", file=shown,
                                key=f"{where}.metrics.{needed}")
    return metrics


def results_from_data(data: Any, source: str) -> Results:
    """A parsed results object (seed-results.json format) -> `Results`; `UserError` names the key."""
    parsed = _validate_file(data, source)
    profiles = dict(parsed.profiles)
    first_run_of: dict[ConfigKey, str] = {}
    seen_ids: dict[str, int] = {}
    records = []
    for i, run in enumerate(parsed.runs):
        if run.id in seen_ids:
            raise UserError(f"duplicate run id '{run.id}' (first at runs[{seen_ids[run.id]}])", file=source, key=f"runs[{i}].id")
        seen_ids[run.id] = i
        if parsed.schema_version == 1:  # farm's own file before TPOT took the field's definition
            run = run.model_copy(update={"metrics": migrate_tpot(run.metrics)})
        metrics = _check_run(run, i, profiles, source)
        flags = parse_cli_flags(run.flags)
        key = config_key(run.engine, run.model, flags)
        # Without an explicit trial id, the first run of a configuration names its trial.
        first = first_run_of.setdefault(key, run.id)
        records.append(RunRecord(
            id=run.id,
            trial=run.trial or first,
            name=run.name if run.name is not None else (None if run.trial else first),
            engine=run.engine,
            model=run.model,
            flags=flags,
            # Files written before the key existed name a node control only in its trial id.
            node_control_of=run.node_control_of or legacy_control_of(run.trial or ""),
            profile=run.profile,
            repeat=run.repeat,
            load=run.load,
            status=run.status,
            reason=run.reason,
            metrics=metrics,
            total_requests=profiles[run.profile].total_requests,
            node=run.node,
            command=run.command,
            provenance=run.provenance,
            limits=run.limits,
        ))
    for i, rec in enumerate(records):
        check_plausible(rec, f"runs[{i}]", source)
    check_trial_ids(records, source)
    return Results(
        source=source,
        profiles=profiles,
        records=records,
        primary_profile=parsed.primary_profile,
        study=parsed.study,
        grid=parsed.grid,
        sweep_id=parsed.sweep_id,
        sweeps=list(parsed.sweeps),
        engine_versions=dict(parsed.engine_versions),
        deciding_metric=parsed.deciding_metric,
    )


# The largest measurement a results file may hold: far beyond any real run (1e15 tokens a second,
# or seconds: 30 million years), and small enough that sums, means and variances of many of them
# stay finite; a value past it is a corrupt or hand-edited file, not a benchmark.
METRIC_MAX = 1e15


def check_plausible(rec: RunRecord, where: str, source: str) -> None:
    """A run's numbers are physically possible, in every quantity selection derives from them:
    a measurement within `METRIC_MAX`, a success rate that is a fraction, a positive duration
    for an ok run, and rates (tokens / duration) that neither overflow nor come from a division
    by a vanishing duration. The refusal names the run's id: whatever the file holds, selection
    never ranks on an infinity or a NaN."""
    def refuse(reason: str, key: str) -> None:
        raise UserError(f"run '{rec.id}': {reason}", file=source, key=f"{where}.{key}")

    for name, value in rec.metrics.items():
        if value > METRIC_MAX:
            refuse(f"{value:.3g} is not a plausible measurement (farm takes at most {METRIC_MAX:.0e})",
                   f"metrics.{name}")
    rate = rec.success_rate
    if rate is not None and not 0 <= rate <= 1:
        key = "metrics.success_rate" if "success_rate" in rec.metrics else "metrics.successful_requests"
        refuse(f"a success rate of {rate:.4g} is not a fraction from 0 to 1 (successful requests over the "
               f"{rec.total_requests} the profile asks for)", key)
    duration = rec.metrics.get("duration_s")
    if rec.status == Status.ok and duration is not None and duration <= 0:
        refuse(f"an ok run's duration must be above 0, got {duration:g}", "metrics.duration_s")
    for name, value in (("tokens per second from its totals", rec.tps_from_totals),
                        ("output tokens per request", rec.output_tokens_per_request)):
        if value is not None and not (math.isfinite(value) and value <= METRIC_MAX):
            refuse(f"its {name} come to {value:.3g} (a duration or request count too small for its totals)",
                   "metrics.duration_s" if "second" in name else "metrics.successful_requests")


def check_trial_ids(records: list[RunRecord], source: str) -> None:
    """One trial id must mean one server: otherwise its runs would be averaged across configurations."""
    key_of: dict[str, ConfigKey] = {}
    for i, rec in enumerate(records):
        if key_of.setdefault(rec.trial, rec.key) != rec.key:
            raise UserError(f"trial '{rec.trial}' is used for two different engine/model/flag sets",
                            file=source, key=f"runs[{i}].trial")


def results_to_data(results: Results) -> dict[str, Any]:
    """`Results` -> the seed-results.json format, with farm's extra keys (trial, repeat, status...)."""
    runs = []
    for rec in results.records:
        run: dict[str, Any] = {
            "id": rec.id, "trial": rec.trial, "name": rec.name, "engine": rec.engine, "model": rec.model,
            "flags": rec.cli_flags, "node_control_of": rec.node_control_of, "profile": rec.profile, "repeat": rec.repeat, "load": rec.load, "status": rec.status.value,
            "reason": rec.reason, "node": rec.node, "command": rec.command, "metrics": dict(rec.metrics),
            "provenance": rec.provenance.model_dump(exclude_none=True) if rec.provenance else None,
            "limits": rec.limits.model_dump(exclude_none=True) if rec.limits else None,
            # joules, watts and tokens per joule, or why not measured: derived, recomputed on read
            "energy": rec.energy.model_dump(exclude_none=True) if rec.provenance is not None else None,
        }
        runs.append({k: v for k, v in run.items() if v is not None})
    head = {
        "schema_version": RESULTS_FORMAT_VERSION,
        "source": results.source,
        "study": results.study,
        "grid": results.grid,
        "sweep_id": results.sweep_id,
        "sweeps": results.sweeps or None,
        "primary_profile": results.primary_profile,
        "engine_versions": results.engine_versions or None,
        # written where it is not the default: files from before it stay as they were
        "deciding_metric": results.deciding_metric if results.deciding_metric != "total_tps" else None,
    }
    profiles = {name: p.model_dump(exclude_none=True) for name, p in results.profiles.items()}
    return {**{k: v for k, v in head.items() if v is not None}, "profiles": profiles, "runs": runs}


def write_results_file(results: Results, path: str | Path) -> Path:
    """Write `results` so that `farm analyze --results PATH` reads them back unchanged."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results_to_data(results), indent=1) + "\n")
    return out


# --------------------------------------------------------------------------------------
# farm's own TrialResults -> records


def profile_info(study: "Study", name: str) -> ProfileInfo:
    spec = study.profiles[name]
    data = spec.data
    fixed = data.fixed_lengths
    if data.kind == "sharegpt":
        dataset = str(data.path)
    elif fixed:
        dataset = data.kind
    else:  # lengths drawn around a mean: not a fixed output length the sanity checks may rely on
        dataset = f"synthetic, mean {data.prompt_tokens} in / {data.output_tokens} out, spread " + \
            ", ".join(f"{k}={v}" for k, v in data.spread.items())
    return ProfileInfo(
        total_requests=spec.requests,
        dataset=dataset,
        input_tokens=data.prompt_tokens if fixed else None,
        output_tokens=data.output_tokens if fixed else None,
        request_rate=spec.rate,
        max_concurrency=spec.max_concurrency,
        seed=spec.seed,
        description=spec.description or None,
        capacity=spec.capacity,
    )


def _latest_attempts(trial_results: list["TrialResult"]) -> list["TrialResult"]:
    # A retried trial has one result per attempt; only the last one says how it ended.
    latest: dict[str, "TrialResult"] = {}
    for tr in trial_results:
        have = latest.get(tr.trial.id)
        if have is None or tr.attempt >= have.attempt:
            latest[tr.trial.id] = tr
    return sorted(latest.values(), key=lambda tr: tr.trial.index)


def _trial_flags(tr: "TrialResult", study: "Study") -> dict[str, Any]:
    spec = study.engines.get(tr.trial.engine) or EngineSpec()
    return redact_flags(tr.trial.all_flags, get_engine(tr.trial.engine).secret_flags(spec))


def records_from_trials(trial_results: list["TrialResult"], study: "Study", *, grid: str | None = None,
                        sweep_id: str | None = None) -> Results:
    """farm's `TrialResult`s -> `Results`, so a sweep and a results file go through the same selection.

    A trial that failed before any benchmark ran still gets one record per profile, carrying its
    status and reason: the report must list it as not eligible, not forget it.
    """
    chosen = _latest_attempts(trial_results)
    names = study.grid_profiles(grid) if grid else list(study.profiles)
    used = names + [p for tr in chosen for p in tr.trial.profiles if p not in names]
    profiles = {p: profile_info(study, p) for p in used if p in study.profiles}
    records: list[RunRecord] = []
    versions: dict[str, str] = {}
    shared = _shared_hostnames(chosen)
    for tr in chosen:
        if tr.engine_version:
            versions.setdefault(tr.trial.engine, tr.engine_version)
        records += _trial_records(tr, study, profiles, shared)
    return Results(
        source=f"sweep {sweep_id}" if sweep_id else (study.source or study.name),
        profiles=profiles,
        records=records,
        primary_profile=study.grid_primary_profile(grid) if grid else study.primary_profile,
        study=study.name,
        grid=grid,
        sweep_id=sweep_id or (chosen[0].sweep_id if chosen else None),
        engine_versions=versions,
        deciding_metric=study.deciding_metric,
        quality=quality_from_results(chosen, study),
    )


def _shared_hostnames(chosen: list["TrialResult"]) -> set[str]:
    """Hostnames of more than one Ray node (several nodes on one machine, as in tests)."""
    ids: dict[str, set[str]] = {}
    for tr in chosen:
        for host, node_id in [(tr.node, tr.node_id)] + [(r.node, r.node_id) for r in tr.runs]:
            if host and node_id:
                ids.setdefault(host, set()).add(node_id)
    return {host for host, seen in ids.items() if len(seen) > 1}


def _node_label(host: str | None, node_id: str | None, shared: set[str]) -> str | None:
    """A node whose hostname other nodes share is named with its Ray node id's first 8 characters
    (as farm/analysis/plan.py names node controls)."""
    return f"{host}-{node_id[:8]}" if host in shared and node_id else host


def _trial_records(tr: "TrialResult", study: "Study", profiles: dict[str, ProfileInfo],
                   shared: set[str] = frozenset()) -> list[RunRecord]:
    t = tr.trial
    node = _node_label(tr.node, tr.node_id, shared)

    def run_node(run) -> str | None:
        # A later pass's run names its own node; a first-pass run ran on the trial's node, whatever
        # hostname a later pass stamped on it (the H200's lent machines are all 'vm').
        if run.node_id:
            return _node_label(run.node or tr.node, run.node_id, shared)
        return node if run.pass_index <= 1 else (run.node or node)

    common = dict(trial=t.id, name=t.name, engine=t.engine, model=t.model, flags=_trial_flags(tr, study),
                  node_control_of=t.node_control_of, node=node, command=tr.serve_command or None,
                  limits=effective_limits(t.engine, t.knobs or {}, t.all_flags, tr.engine_reported))
    out = []
    for run in tr.runs:
        metrics = run.metrics.model_dump(exclude_none=True) if run.metrics else {}
        asked = profiles[run.profile].total_requests if run.profile in profiles else None
        out.append(RunRecord(id=f"{t.label}/{run.profile}/{run.repeat}", profile=run.profile, repeat=run.repeat,
                             load=run.load, status=run.status, reason=run.reason, metrics=metrics, total_requests=asked,
                             provenance=provenance_of(tr, run.started_at, run.finished_at, run.pass_index, run),
                             **{**common, "node": run_node(run)}))
    ran = {run.profile for run in tr.runs}
    for profile in t.profiles:
        if profile not in ran and tr.status != Status.ok:
            out.append(RunRecord(id=f"{t.label}/{profile}/0", profile=profile, status=tr.status,
                                 reason=tr.reason or tr.status.value,
                                 total_requests=profiles[profile].total_requests if profile in profiles else None,
                                 provenance=provenance_of(tr, None), **common))
    return out


def provenance_of(tr: "TrialResult", started_at: float | None, finished_at: float | None = None,
                  pass_index: int = 1, run: "ProfileRun | None" = None) -> Provenance:
    """A trial's versions, GPU, weights and engine start, as one run of it carries them: the engine
    start is the one that served the run (a later pass or rung starts the engine again), unknown
    for a later pass stored without its start's facts. The run's machine and GPU samples where it
    recorded them; the machine's fingerprint where it is the trial's (a later pass elsewhere names
    its machine by key only)."""
    reported = _start_reported(tr, pass_index)
    cold = reported.get("compile_cache_hit")
    start = reported.get("ready_s")
    when = datetime.fromtimestamp(started_at, timezone.utc).isoformat(timespec="seconds") if started_at else None
    return Provenance(
        engine_version=tr.engine_version,
        client_version=f"guidellm {tr.guidellm_version}" if tr.guidellm_version else None,
        gpu=tr.gpu_name,
        gpus=tr.trial.gpus,
        weights=tr.trial.weights,
        engine_start_s=float(start) if isinstance(start, (int, float)) else None,
        engine_start_cold=(not cold) if isinstance(cold, bool) else reported.get("compile_cache_cold"),
        started_at=when,
        trial_wall_s=_rungs_wall(tr.engine_reported) or tr.held_seconds,
        warmup_s=round(sum(w.seconds for w in tr.warmup_runs), 2) if tr.warmup_runs else None,
        run_wall_s=_seconds(started_at, finished_at),
        start_phases=start_phases(reported),
        start_cache=start_cache(reported),
        start_cache_unusable=_text(reported.get("compile_cache_load_failure")),
        engine_start_pass=pass_index if reported else None,
        machine_key=run.machine if run is not None else None,
        machine=tr.machine if run is not None and tr.machine is not None and run.machine == tr.machine.key else None,
        gpu_samples=run.gpu if run is not None else None,
    )


def _start_reported(tr: "TrialResult", pass_index: int) -> dict:
    """What the engine reported of the start that served a run of pass `pass_index`: its span's
    facts where recorded; the trial's own for its first pass otherwise; nothing (no start known)
    for a later pass without them, rather than the first pass's start in its place."""
    span = next((s for s in tr.spans if s.pass_index == pass_index), None)
    if span is not None and span.engine_reported is not None:
        return span.engine_reported
    return tr.engine_reported if pass_index <= 1 else {}


def _text(value: object) -> str | None:
    """A text the engine's log gave, or None (a stored trial may hold anything under its keys)."""
    return (value.strip() or None) if isinstance(value, str) else None


def _seconds(start: float | None, end: float | None) -> float | None:
    return round(end - start, 2) if start is not None and end is not None and end >= start else None


def _rungs_wall(reported: dict) -> float | None:
    """A halving sweep's trial held its GPUs once per rung (farm/analysis/halving.py keeps each
    rung's wall time): their sum, not the span from the first rung's start to the last one's end."""
    walls = reported.get("halving_wall_s")
    if not isinstance(walls, dict) or not walls:
        return None
    try:
        return round(sum(float(v) for v in walls.values()), 2)
    except (TypeError, ValueError):
        return None
