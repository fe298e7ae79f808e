"""Where an engine's start went, read from its own log (pure): the largest cost of a trial that
measures nothing. On the H200 a cold vLLM start took 251-310 s: torch.compile ~56-95 s, the first
profiling run (Triton compiling its kernels) ~82 s, CUDA-graph capture ~25-32 s, the rest imports,
model build and cache allocation; a start that found its compile cache warm took about 100 s.

Each engine's adapter reads its log into `reported_startup` (farm/engines/); the actor adds the
seconds from launch to ready (`ready_s`). Here they become one record per start: the phases that
the log names, the rest of the time as `other` (never filled in beyond what was measured), and
whether the compile cache was cold or warm where the log says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Phase -> the engine_reported keys whose seconds make it up.
PHASE_KEYS: dict[str, tuple[str, ...]] = {
    "weight_load": ("model_load_s",),
    "compilation": ("compile_s",),
    "kernel_profiling": ("profile_run_s",),
    "cuda_graphs": ("cuda_graph_capture_s", "prefill_cuda_graph_capture_s"),
}
PHASE_WORDS = {"weight_load": "weight load", "compilation": "graph compilation", "kernel_profiling":
               "first profiling run (kernel compilation)", "cuda_graphs": "CUDA-graph capture",
               "other": "imports, model build, cache allocation, server"}


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def start_phases(reported: Mapping[str, Any]) -> dict[str, float] | None:
    """Seconds of each phase of one start, `other` the rest of launch-to-ready; None when the
    start's length was not recorded."""
    ready = _seconds(reported.get("ready_s"))
    if ready is None:
        return None
    out: dict[str, float] = {}
    for phase, keys in PHASE_KEYS.items():
        values = [v for k in keys if (v := _seconds(reported.get(k))) is not None]
        if values:
            out[phase] = round(sum(values), 2)
    out["other"] = round(max(ready - sum(out.values()), 0.0), 2)
    return out


def start_cache(reported: Mapping[str, Any]) -> str | None:
    """cold (the engine compiled), warm (it loaded what an earlier start compiled), or None where
    neither its log nor farm's node cache says."""
    hit = reported.get("compile_cache_hit")
    if isinstance(hit, bool):
        return "warm" if hit else "cold"
    cold = reported.get("compile_cache_cold")
    if isinstance(cold, bool):
        return "cold" if cold else "warm"
    return None
