"""Effective limits: what an engine ended up running with, read from its log, beside what was asked.

Two engines compared at their defaults may differ less in speed than in one default: on the H200,
SGLang 0.5.16 runs this hybrid model at most 83 requests at once and caps `--max-running-requests
512` back to 83 (its mamba state cache decides), while vLLM 0.20.2 runs up to 1024. So every trial
carries a structured record of its effective limits (requests at once, KV-cache tokens, the batch
token budget), each knob that asked for a limit the engine did not grant is named
(`knob_overridden`: asked 512, got 83), and an engine comparison whose engines ran under clearly
different limits says so beside its verdict.

Pure: inputs are the trial's knobs and flags and what the engine adapter read from its log
(`Engine.reported_capacity`, in `TrialResult.engine_reported`).
"""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import Field

from farm.engines import get_engine
from farm.strict import Strict

# The limits, in the engine-neutral names of farm's knobs and of Engine.reported_capacity.
LIMITS: dict[str, str] = {
    "max_running_requests": "requests at once",
    "kv_cache_tokens": "KV-cache tokens",
    "max_batched_tokens": "batch token budget",
}
# Knobs whose asked value the log can confirm or contradict (knob -> reported key).
CHECKED_KNOBS: dict[str, str] = {
    "max_running_requests": "max_running_requests",
    "max_batched_tokens": "max_batched_tokens",
    "max_model_len": "max_model_len",
    "prefix_caching": "prefix_caching",
}
# "Clearly different": the larger of two engines' limits is at least this many times the smaller.
CLEAR_RATIO = 1.5


class KnobOverride(Strict):
    """A knob that asked for a value the engine did not run with (its log says another)."""

    knob: str = Field(description="The knob (engine-neutral name) or flag that asked.")
    asked: int | float | bool = Field(description="What the study asked for.")
    got: int | float | bool = Field(description="What the engine's log says it ran with.")


class EffectiveLimits(Strict):
    """The limits one trial's engine ran under, as its log states them (None: the log does not say)."""

    max_running_requests: int | None = Field(default=None, description="Requests the engine runs at once.")
    max_running_requests_from: str | None = Field(
        default=None, description="'log', or 'engine default' where the log does not state it and the "
        "adapter knows the engine's default for what the log shows.")
    kv_cache_tokens: int | None = Field(default=None, description="Tokens the KV cache holds.")
    max_batched_tokens: int | None = Field(default=None, description="Tokens one scheduler step may batch "
                                           "(vLLM max_num_batched_tokens, SGLang chunked_prefill_size).")
    mamba_cache_size: int | None = Field(default=None, description="Linear-attention state slots (hybrid models).")
    knob_overridden: list[KnobOverride] = Field(default_factory=list, description="Knobs the engine overrode.")

    def value(self, name: str) -> int | None:
        return getattr(self, name)

    def empty(self) -> bool:
        return all(self.value(n) is None for n in LIMITS) and not self.knob_overridden


def _asked_flags(engine: str, knobs: Mapping[str, Any], flags: Mapping[str, Any]) -> dict[str, Any]:
    """knob -> value asked: from the trial's knobs, or from a flag set directly that a knob renders to."""
    asked = {k: knobs[k] for k in CHECKED_KNOBS if k in knobs}
    try:
        renderers = get_engine(engine).knob_renderers
    except (KeyError, ValueError):
        return asked
    for knob in ("max_running_requests", "max_batched_tokens", "max_model_len"):
        if knob in asked or knob not in renderers:
            continue
        try:
            (flag,) = renderers[knob](1, {})
        except (ValueError, TypeError):
            continue
        value = flags.get(flag)
        if value is not None and value is not False:
            try:
                asked[knob] = int(value)
            except (TypeError, ValueError):
                pass
    return asked


def knob_overrides(asked: Mapping[str, Any], reported: Mapping[str, Any]) -> list[KnobOverride]:
    """Each asked knob whose value the log contradicts. A knob the log does not speak of is not one."""
    out = []
    for knob, key in CHECKED_KNOBS.items():
        if knob not in asked or reported.get(key) is None:
            continue
        want, got = asked[knob], reported[key]
        if isinstance(want, bool) or isinstance(got, bool):
            if bool(want) != bool(got):
                out.append(KnobOverride(knob=knob, asked=bool(want), got=bool(got)))
            continue
        try:
            if float(want) != float(got):
                out.append(KnobOverride(knob=knob, asked=want, got=got))
        except (TypeError, ValueError):
            continue
    return out


def effective_limits(engine: str, knobs: Mapping[str, Any], flags: Mapping[str, Any],
                     reported: Mapping[str, Any]) -> EffectiveLimits | None:
    """The trial's effective limits from what its engine reported; None when it reported none."""
    def as_int(key: str) -> int | None:
        v = reported.get(key)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    limits = EffectiveLimits(
        max_running_requests=as_int("max_running_requests"),
        kv_cache_tokens=as_int("kv_cache_tokens"),
        max_batched_tokens=as_int("max_batched_tokens"),
        mamba_cache_size=as_int("mamba_cache_size"),
        knob_overridden=knob_overrides(_asked_flags(engine, knobs, flags), reported),
    )
    if limits.max_running_requests is not None:
        limits.max_running_requests_from = reported.get("max_running_requests_from") or "log"
    return None if limits.empty() else limits


def limits_apart(a: EffectiveLimits | None, b: EffectiveLimits | None, *, names: tuple[str, str] = ("a", "b"),
                 ratio: float = CLEAR_RATIO) -> list[str]:
    """The limits on which two engines clearly differ, one phrase each: 'requests at once: sglang 83,
    vllm 1024 (12.3x)'. Empty when they do not, or when either side's log did not say."""
    if a is None or b is None:
        return []
    out = []
    for name, label in LIMITS.items():
        x, y = a.value(name), b.value(name)
        if not x or not y:
            continue
        big, small = max(x, y), min(x, y)
        if big / small >= ratio:
            out.append(f"{label}: {names[0]} {x:,}, {names[1]} {y:,} ({big / small:.1f}x)")
    return out


def overrides_text(limits: EffectiveLimits | None) -> str:
    """'max_running_requests: asked 512, got 83' for each overridden knob; '' for none."""
    if limits is None:
        return ""
    return "; ".join(f"{o.knob}: asked {value_text(o.asked)}, got {value_text(o.got)}" for o in limits.knob_overridden)


def value_text(x: int | float | bool) -> str:
    """A limit or knob value as a reader reads it: 'on'/'off', 1,392,614, 0.9."""
    if isinstance(x, bool):
        return "on" if x else "off"
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"
