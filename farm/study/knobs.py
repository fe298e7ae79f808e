"""Engine-neutral knobs: what a study says once ("prefix caching on"), each engine spells its own way.

A knob has a name, a value type, and a description of what it means for every engine. A study
sets knobs on a grid block (`knobs: {prefix_caching: true}`) or sweeps them
(`knob_axes: {max_running_requests: [256, 512]}`); grid expansion validates each value here and
asks the block's engine adapter to render the knobs into that engine's flags
(`Engine.render_knobs`, using the adapter's `knob_renderers` table and `render_with` below).

Equal names do not mean equal effects, and this module does not pretend they do: one engine's
GPU-memory budget counts activations and another's does not, one engine's batched-token budget
also chunks long prompts, data parallelism of a mixture-of-experts model is lockstep in one
engine and independent replicas in another. Each adapter documents its own spelling and what
differs. Each trial therefore also records what the engine
reports it got (KV-cache tokens, concurrent sequences, CUDA-graph sizes, the prefix-caching
value it used): `Engine.reported_capacity`.

A knob an engine cannot express raises `KnobError` at expansion time, naming the grid key;
a study may instead let that engine skip the value (`skip_unsupported`).
A knob whose value is `null` is not set: the engine keeps its own default.

Pure: no engine is imported here, so the study's schema (farm/study/sections.py, grid_spec.py,
spec.py) can validate knobs without importing adapters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

SPECULATIVE_METHODS = ("mtp", "eagle", "eagle3", "ngram")
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bf16")


class KnobError(ValueError):
    """A knob value that is wrong, or that an engine cannot express.

    `unsupported` is true when the value is fine but this engine (or this engine with the
    other knobs of the same trial) has no way to express it: the only kind a study may skip.
    """

    def __init__(self, knob: str, reason: str, *, unsupported: bool = False):
        self.knob = knob
        self.reason = reason
        self.unsupported = unsupported
        super().__init__(f"knob '{knob}': {reason}")


# ---------------------------------------------------------------------------------------
# Value parsers: YAML value -> canonical value (or ValueError with a short reason)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError(f"expected true or false, got {value!r}")


def _pos_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"expected a whole number >= 1, got {value!r}")
    return value


def _fraction(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"expected a fraction in (0, 1], got {value!r}")
    return float(value)


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a name, got {value!r}")
    return value.strip().lower()


def _quantization(value: Any) -> str:
    name = _name(value)
    return "none" if name in ("none", "bf16", "bfloat16", "fp16", "float16", "unquantized") else name


def _kv_cache_dtype(value: Any) -> str:
    name = _name(value)
    name = {"bfloat16": "bf16", "fp8_e4m3fn": "fp8_e4m3"}.get(name, name)
    if name not in KV_CACHE_DTYPES:
        raise ValueError(f"expected one of {', '.join(KV_CACHE_DTYPES)}, got {value!r}")
    return name


def _kv_offload(value: Any) -> float | bool:
    """false: no offload; a number: GiB of CPU memory for the extended KV cache."""
    if value is False or value == 0:
        return False
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or not math.isfinite(value):
        raise ValueError(f"expected false or the CPU memory for the KV cache in GiB (e.g. 64), got {value!r}")
    return int(value) if float(value).is_integer() else float(value)


def _cuda_graph(value: Any) -> bool | int:
    """true: on (engine default sizes); false: off; a number: on, capturing batches up to that size."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value >= 1:
        return value
    raise ValueError(f"expected true, false or the largest batch size to capture (e.g. 512), got {value!r}")


def _speculative(value: Any) -> dict[str, Any] | bool:
    """false: off; `{method: mtp, num_tokens: 4}`; eagle/eagle3 also take `draft_model`."""
    if value is False:
        return False
    if not isinstance(value, Mapping):
        raise ValueError(f"expected false or {{method: mtp, num_tokens: 4}}, got {value!r}")
    unknown = set(value) - {"method", "num_tokens", "draft_model"}
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))} (known: method, num_tokens, draft_model)")
    method = _name(value.get("method"))
    if method not in SPECULATIVE_METHODS:
        raise ValueError(f"method must be one of {', '.join(SPECULATIVE_METHODS)}, got {value.get('method')!r}")
    if "num_tokens" not in value:
        raise ValueError("num_tokens is required (how many tokens to propose per step)")
    out: dict[str, Any] = {"method": method, "num_tokens": _pos_int(value["num_tokens"])}
    if value.get("draft_model") is not None:
        if not isinstance(value["draft_model"], str):
            raise ValueError(f"draft_model must be a model id or path, got {value['draft_model']!r}")
        out["draft_model"] = value["draft_model"]
    if method in ("eagle", "eagle3") and "draft_model" not in out:
        raise ValueError(f"method {method} needs a draft_model")
    return out


@dataclass(frozen=True)
class Knob:
    name: str
    parse: Callable[[Any], Any]
    description: str


# The canonical order: knobs render in this order, and error messages list them in it.
KNOBS: dict[str, Knob] = {
    k.name: k
    for k in (
        Knob("quantization", _quantization,
             "Weight quantization. Resolved first to a model variant of the study (`models.<key>.quantization` "
             "with `variant_of`), else to the engine's online quantization. `none` is the unquantized variant."),
        Knob("prefix_caching", _bool,
             "Automatic prefix caching (reuse of the KV cache of shared prompt prefixes), on or off. Engines "
             "differ in their default, so both values are explicit where the engine has flags for both."),
        Knob("kv_cache_dtype", _kv_cache_dtype,
             "KV-cache element type: auto (engine default, renders nothing), fp8 (E4M3), fp8_e4m3, fp8_e5m2, bf16."),
        Knob("kv_offload", _kv_offload,
             "Extended KV cache in CPU memory, in GiB (false: none). Engines differ in whether the size is per "
             "rank or summed over ranks, and in what the offloaded cache needs (e.g. a prefix cache)."),
        Knob("max_running_requests", _pos_int, "Most sequences scheduled at once (the batch limit)."),
        Knob("max_batched_tokens", _pos_int,
             "Token budget of one scheduler step. Not the same thing in every engine: some also split long "
             "prompts into chunks of that size."),
        Knob("gpu_memory_fraction", _fraction,
             "Fraction of GPU memory the engine budgets. Engines count different things in it (weights, "
             "activations, KV pool): equal values are not equal budgets."),
        Knob("cuda_graph", _cuda_graph,
             "CUDA graphs. true: engine default; false: off (eager); N: capture up to N (tokens or requests, "
             "depending on the engine)."),
        Knob("tensor_parallel", _pos_int, "GPUs sharding one replica's attention; 1 renders nothing."),
        Knob("data_parallel", _pos_int,
             "Attention replicas; a trial needs tensor_parallel x data_parallel GPUs on one node. For a "
             "mixture-of-experts model engines differ: lockstep ranks sharing the experts, or independent replicas."),
        Knob("expert_parallel", _bool, "Shard the MoE experts across all tensor_parallel x data_parallel GPUs."),
        Knob("speculative", _speculative,
             "Speculative decoding, {method: mtp|eagle|eagle3|ngram, num_tokens: N[, draft_model]}: N tokens "
             "proposed per step."),
        Knob("max_model_len", _pos_int, "Longest sequence (prompt + output) served."),
        Knob("scheduling_policy", _name,
             "Order in which waiting requests are scheduled: fcfs, priority, or an engine's own (e.g. lpm)."),
    )
}


def parse_knob(name: str, value: Any) -> Any:
    """The canonical value of one knob; `None` stays `None` (not set). Raises `KnobError`."""
    knob = KNOBS.get(name)
    if knob is None:
        raise KnobError(name, f"unknown knob (known: {', '.join(KNOBS)})")
    if value is None:
        return None
    try:
        return knob.parse(value)
    except ValueError as exc:
        raise KnobError(name, str(exc)) from None


def gpus_of(knobs: Mapping[str, Any]) -> int:
    """GPUs the parallel knobs ask for: tensor_parallel x data_parallel (both engines)."""
    return (knobs.get("tensor_parallel") or 1) * (knobs.get("data_parallel") or 1)


# ---------------------------------------------------------------------------------------
# Rendering dispatch

# A renderer gets the knob's canonical value and all knobs of the trial (some knobs interact:
# parallel layout, hierarchical cache and radix cache), and returns flags without dashes.
Renderer = Callable[[Any, Mapping[str, Any]], dict[str, Any]]


def render_with(engine: str, renderers: Mapping[str, Renderer], knobs: Mapping[str, Any],
                taken: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Render `knobs` into flags with one engine's renderer table, in the canonical knob order.

    Knobs set to `None` are skipped. A knob with no renderer, or one whose renderer refuses the
    value, raises `KnobError`; so do two knobs that would set the same flag differently, and a
    knob that sets a flag named in `taken` (flag -> where it is already set).
    """
    flags: dict[str, Any] = {}
    owner: dict[str, str] = {}
    unknown = [name for name in knobs if name not in KNOBS]
    if unknown:
        raise KnobError(unknown[0], f"unknown knob (known: {', '.join(KNOBS)})")
    for name in KNOBS:
        value = knobs.get(name)
        if value is None:
            continue
        renderer = renderers.get(name)
        if renderer is None:
            raise KnobError(name, f"{engine} has no equivalent of this knob", unsupported=True)
        for flag, flag_value in renderer(value, knobs).items():
            for other in (flag, f"no-{flag}", flag.removeprefix("no-")):  # --x and --no-x are one setting
                if taken and other in taken:
                    raise KnobError(name, f"sets --{flag}, but {taken[other]} already sets --{other}")
            if flag in flags and flags[flag] != flag_value:
                raise KnobError(name, f"sets --{flag}={flag_value!r}, but knob '{owner[flag]}' sets it to {flags[flag]!r}")
            flags[flag] = flag_value
            owner.setdefault(flag, name)
    return flags


def describe(value: Any) -> str:
    """A knob value as a short string for messages and MLflow params."""
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value).lower() if isinstance(value, bool) else str(value)
