"""The results file (the seed's `seed-results.json` format, and farm's own after a sweep): its
schema, read into `Results` with every key checked (`results_from_data`: a `UserError` names the
key; `check_plausible`, `check_trial_ids`), and written back (`results_to_data`,
`write_results_file`). Its flags are the CLI strings `--name=value`, read into a record's mapping
here. Its public names are importable from farm/analysis/records.py."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError, field_validator

from farm.analysis.energy import RunEnergy
from farm.analysis.limits import EffectiveLimits
from farm.analysis.records_models import (ConfigKey, DecidingMetric, ProfileInfo, Provenance, Results, RunRecord,
                                          config_key)
from farm.analysis.results import Status, migrate_tpot
from farm.engines.base import parse_cli_flags
from farm.errors import UserError, key_path
from farm.inputs import safe_name_problem
from farm.strict import Strict as _Strict
from farm.study.trial import legacy_control_of

RESULTS_FORMAT_VERSION = 2  # 2: TPOT as the field means it (farm/analysis/definitions.py)


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
