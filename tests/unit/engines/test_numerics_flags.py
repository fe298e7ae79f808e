"""Each engine declares which of its flags change numerics (issue 49, the quality gate's first part).

Held against every registered engine: a declared flag is one the engine takes (its kept `--help`),
and every knob that changes what the model computes (quantization, KV-cache dtype, speculative
decoding) renders only flags the engine declares, so a trial built from those knobs is always
gated. Flags that only move speed (prefix caching, batch limits, CUDA graphs) are not declared.
"""

from __future__ import annotations

import pytest

from farm.engines import ENGINES, get_engine
from farm.study.knobs import parse_knob

NAMES = sorted(ENGINES)

# Knob values that change numerics, and the engines that can express each.
NUMERICS_KNOBS = [
    ("quantization", "fp8"),
    ("kv_cache_dtype", "fp8"),
    ("kv_cache_dtype", "fp8_e5m2"),
    ("speculative", {"method": "mtp", "num_tokens": 2}),
    ("speculative", {"method": "eagle", "num_tokens": 3, "draft_model": "some/draft"}),
]
# Knobs that move only speed or memory: they render no numerics flag.
SPEED_KNOBS = [
    ("prefix_caching", True), ("prefix_caching", False), ("max_running_requests", 64),
    ("max_batched_tokens", 4096), ("gpu_memory_fraction", 0.8), ("cuda_graph", False), ("cuda_graph", 256),
    ("tensor_parallel", 2), ("max_model_len", 4096), ("scheduling_policy", "fcfs"),
]


def _expressible(knobs: list[tuple[str, object]]) -> list[tuple[str, str, object]]:
    """(engine, knob, value) for each engine that can express the knob: a pair it cannot is no case."""
    return [(n, k, v) for n in NAMES for k, v in knobs if k in get_engine(n).knob_renderers]


# The engines farm keeps a `--help` of (the mock has none: its flags are farm's own).
WITH_HELP = [n for n in NAMES if get_engine(n).known_flags() is not None]


def test_the_engines_that_serve_models_are_held_to_their_help():
    assert {"vllm", "sglang"} <= set(WITH_HELP)
    assert {k for _, k, _ in _expressible(NUMERICS_KNOBS)} == {k for k, _ in NUMERICS_KNOBS}


@pytest.mark.parametrize("name", WITH_HELP)
def test_declared_numerics_flags_are_flags_the_engine_takes(name):
    engine = get_engine(name)
    known = engine.known_flags()
    unknown = sorted(f for f in engine.numerics_flags if f not in known)
    assert not unknown, f"{name} declares numerics flags its --help does not list: {unknown}"
    assert all(f in engine.numerics_flags for f in engine.numerics_defaults), "a default for an undeclared flag"


@pytest.mark.parametrize("name,knob,value", _expressible(NUMERICS_KNOBS), ids=lambda v: str(v)[:20])
def test_a_knob_that_changes_numerics_renders_only_numerics_flags(name, knob, value):
    engine = get_engine(name)
    flags = engine.render_knobs({knob: parse_knob(knob, value)})
    assert flags, (name, knob, value)
    assert engine.numerics(flags) == flags, f"{name}: {knob}={value} renders {flags}, not all declared numerics"


@pytest.mark.parametrize("name,knob,value", _expressible(SPEED_KNOBS), ids=lambda v: str(v)[:20])
def test_a_knob_that_moves_only_speed_renders_no_numerics_flag(name, knob, value):
    engine = get_engine(name)
    assert engine.numerics(engine.render_knobs({knob: parse_knob(knob, value)})) == {}


@pytest.mark.parametrize("name,flags,expected", [
    ("vllm", {"kv-cache-dtype": "auto", "dtype": "AUTO", "max-num-seqs": 8}, {}),
    ("vllm", {"dtype": "bfloat16", "enable-prefix-caching": True}, {"dtype": "bfloat16"}),
    ("vllm", {"calculate-kv-scales": False, "quantization": None}, {}),
    ("vllm", {"--quantization": "fp8"}, {"--quantization": "fp8"}),
    ("sglang", {"speculative-algorithm": "NEXTN", "speculative-num-steps": 3, "tp-size": 2},
     {"speculative-algorithm": "NEXTN", "speculative-num-steps": 3}),
    ("sglang", {"kv-cache-dtype": "auto", "sampling-defaults": "model", "disable-radix-cache": True}, {}),
    ("sglang", {"sampling-defaults": "openai"}, {"sampling-defaults": "openai"}),
    ("mock", {"ttft-ms": 5, "itl-ms": 2}, {}),
], ids=["vllm-defaults", "vllm-dtype", "vllm-off", "vllm-dashes", "sglang-speculative-family",
        "sglang-defaults", "sglang-sampling", "mock-none"])
def test_numerics_picks_the_flags_set_away_from_the_default(name, flags, expected):
    assert get_engine(name).numerics(flags) == expected
