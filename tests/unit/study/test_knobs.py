"""Engine-neutral knobs: values, exact flags per engine, the seed rebuilt from knobs, expansion errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import shared_file
from farm.engines import get_engine
from farm.errors import SpecError
from farm.study.grid import SEED_PROFILE_SECONDS, MeasuredDurations, expand, grid_cost, grid_costs, resolve_quantization
from farm.study.knobs import KNOBS, KnobError, parse_knob, render_with
from farm.study.load import load_study
from farm.study.spec import Study
from farm.study.trial import trial_id

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

MTP4 = {"method": "mtp", "num_tokens": 4}


# ---------------------------------------------------------------------------------------
# Values


@pytest.mark.parametrize("name, value, expected", [
    ("prefix_caching", True, True),
    ("quantization", "FP8", "fp8"),
    ("quantization", "bf16", "none"),
    ("kv_cache_dtype", "bfloat16", "bf16"),
    ("kv_offload", 64, 64),
    ("kv_offload", 0, False),
    ("kv_offload", 12.5, 12.5),
    ("cuda_graph", 512, 512),
    ("cuda_graph", False, False),
    ("gpu_memory_fraction", 0.9, 0.9),
    ("speculative", {"method": "MTP", "num_tokens": 4}, MTP4),
    ("speculative", False, False),
    ("scheduling_policy", "FCFS", "fcfs"),
    ("max_running_requests", None, None),
])
def test_knob_values_are_canonical(name, value, expected):
    assert parse_knob(name, value) == expected


@pytest.mark.parametrize("name, value, message", [
    ("prefix_caching", "yes", "expected true or false"),
    ("max_running_requests", 0, "whole number >= 1"),
    ("max_running_requests", True, "whole number >= 1"),
    ("gpu_memory_fraction", 1.5, r"fraction in \(0, 1\]"),
    ("kv_cache_dtype", "int4", "expected one of"),
    ("cuda_graph", "maybe", "largest batch size"),
    ("speculative", {"method": "mtp"}, "num_tokens is required"),
    ("speculative", {"method": "medusa", "num_tokens": 2}, "method must be one of"),
    ("speculative", {"method": "eagle3", "num_tokens": 2}, "needs a draft_model"),
    ("speculative", {"method": "mtp", "num_tokens": 2, "topk": 4}, "unknown key"),
    ("turbo", True, "unknown knob"),
])
def test_bad_knob_values(name, value, message):
    with pytest.raises(KnobError, match=message):
        parse_knob(name, value)


# ---------------------------------------------------------------------------------------
# For each knob and engine, the exact flags

KNOB_FLAGS = [
    # knobs, vLLM flags, SGLang flags
    ({"quantization": "fp8"}, {"quantization": "fp8"}, {"quantization": "fp8"}),
    ({"prefix_caching": True}, {"enable-prefix-caching": True}, {}),
    ({"prefix_caching": False}, {"no-enable-prefix-caching": True}, {"disable-radix-cache": True}),
    ({"kv_cache_dtype": "auto"}, {}, {}),
    ({"kv_cache_dtype": "fp8"}, {"kv-cache-dtype": "fp8"}, {"kv-cache-dtype": "fp8_e4m3"}),
    ({"kv_cache_dtype": "fp8_e5m2"}, {"kv-cache-dtype": "fp8_e5m2"}, {"kv-cache-dtype": "fp8_e5m2"}),
    ({"kv_cache_dtype": "bf16"}, {"kv-cache-dtype": "bfloat16"}, {"kv-cache-dtype": "bf16"}),
    ({"kv_offload": False}, {}, {}),
    ({"kv_offload": 64}, {"kv-offloading-size": 64, "kv-offloading-backend": "native"},
     {"enable-hierarchical-cache": True, "hicache-size": 64}),
    ({"max_running_requests": 256}, {"max-num-seqs": 256}, {"max-running-requests": 256}),
    ({"max_batched_tokens": 16384}, {"max-num-batched-tokens": 16384}, {"chunked-prefill-size": 16384}),
    ({"gpu_memory_fraction": 0.95}, {"gpu-memory-utilization": 0.95}, {"mem-fraction-static": 0.95}),
    ({"cuda_graph": True}, {}, {}),
    ({"cuda_graph": False}, {"enforce-eager": True}, {"disable-cuda-graph": True}),
    ({"cuda_graph": 512}, {"max-cudagraph-capture-size": 512}, {"cuda-graph-max-bs": 512}),
    ({"tensor_parallel": 1}, {}, {}),
    ({"tensor_parallel": 2}, {"tensor-parallel-size": 2}, {"tp-size": 2}),
    ({"data_parallel": 2}, {"data-parallel-size": 2}, {"dp-size": 2}),
    ({"tensor_parallel": 2, "expert_parallel": True},
     {"tensor-parallel-size": 2, "enable-expert-parallel": True}, {"tp-size": 2, "ep-size": 2}),
    ({"data_parallel": 2, "expert_parallel": True},
     {"data-parallel-size": 2, "enable-expert-parallel": True},
     {"tp-size": 2, "dp-size": 2, "enable-dp-attention": True, "ep-size": 2}),
    ({"tensor_parallel": 2, "data_parallel": 2, "expert_parallel": True},
     {"tensor-parallel-size": 2, "data-parallel-size": 2, "enable-expert-parallel": True},
     {"tp-size": 4, "dp-size": 2, "enable-dp-attention": True, "ep-size": 4}),
    ({"expert_parallel": False}, {}, {}),
    ({"speculative": MTP4}, {"speculative-config": {"method": "mtp", "num_speculative_tokens": 4}},
     {"speculative-algorithm": "NEXTN", "speculative-num-steps": 4, "speculative-eagle-topk": 1,
      "speculative-num-draft-tokens": 5}),
    ({"speculative": {"method": "eagle3", "num_tokens": 3, "draft_model": "org/draft"}},
     {"speculative-config": {"method": "eagle3", "num_speculative_tokens": 3, "model": "org/draft"}},
     {"speculative-algorithm": "EAGLE3", "speculative-num-steps": 3, "speculative-eagle-topk": 1,
      "speculative-num-draft-tokens": 4, "speculative-draft-model-path": "org/draft"}),
    ({"speculative": False}, {}, {}),
    ({"max_model_len": 32768}, {"max-model-len": 32768}, {"context-length": 32768}),
    ({"scheduling_policy": "fcfs"}, {"scheduling-policy": "fcfs"}, {"schedule-policy": "fcfs"}),
    ({"scheduling_policy": "priority"}, {"scheduling-policy": "priority"},
     {"schedule-policy": "priority", "enable-priority-scheduling": True}),
]


@pytest.mark.parametrize("knobs, vllm_flags, sglang_flags", KNOB_FLAGS,
                         ids=[",".join(f"{k}={v}" for k, v in row[0].items()) for row in KNOB_FLAGS])
def test_knob_flags_per_engine(knobs, vllm_flags, sglang_flags):
    parsed = {k: parse_knob(k, v) for k, v in knobs.items()}
    assert get_engine("vllm").render_knobs(parsed) == vllm_flags
    assert get_engine("sglang").render_knobs(parsed) == sglang_flags


def test_every_knob_is_in_the_table_for_both_engines():
    covered = {name for row in KNOB_FLAGS for name in row[0]}
    assert covered == set(KNOBS)
    for engine in ("vllm", "sglang"):
        assert set(get_engine(engine).knob_renderers) == set(KNOBS)


def test_gpu_count_of_rendered_parallel_knobs_is_tp_times_dp_on_both_engines():
    for tp, dp, ep in [(1, 1, False), (2, 1, False), (1, 2, False), (2, 2, False), (2, 1, True), (1, 2, True),
                       (2, 2, True)]:
        knobs = {"tensor_parallel": tp, "data_parallel": dp, "expert_parallel": ep}
        for name in ("vllm", "sglang"):
            engine = get_engine(name)
            assert engine.gpus(engine.render_knobs(knobs)) == tp * dp, (name, knobs)


@pytest.mark.parametrize("engine, knobs, message", [
    ("vllm", {"scheduling_policy": "lpm"}, "vLLM schedules only by fcfs, priority"),
    ("sglang", {"speculative": {"method": "ngram", "num_tokens": 4}}, "does not map speculative method 'ngram'"),
    ("sglang", {"kv_offload": 12.5}, "whole GB"),
    ("sglang", {"kv_offload": 64, "prefix_caching": False}, "radix cache"),
    ("vllm", {"quantization": "awq"}, "model variant"),
    ("sglang", {"quantization": "gptq"}, "model variant"),
    ("vllm", {"expert_parallel": True}, "needs tensor_parallel x data_parallel > 1"),
    ("sglang", {"expert_parallel": True, "tensor_parallel": 1}, "needs tensor_parallel x data_parallel > 1"),
    ("mock", {"prefix_caching": True}, "mock has no equivalent of this knob"),
])
def test_inexpressible_knobs_are_unsupported(engine, knobs, message):
    with pytest.raises(KnobError, match=message) as exc:
        get_engine(engine).render_knobs({k: parse_knob(k, v) for k, v in knobs.items()})
    assert exc.value.unsupported


def test_two_knobs_setting_one_flag_differently_is_an_error():
    renderers = {"max_running_requests": lambda n, k: {"x": n}, "max_batched_tokens": lambda n, k: {"x": n + 1}}
    with pytest.raises(KnobError, match="knob 'max_running_requests' sets it"):
        render_with("e", renderers, {"max_running_requests": 1, "max_batched_tokens": 1})


# ---------------------------------------------------------------------------------------
# A study with knobs

def _study(blocks, models=None, engines=None) -> Study:
    return Study.model_validate({
        "name": "t",
        "models": models or {"bf16": "org/m", "fp8": {"name": "org/m-FP8", "variant_of": "bf16", "quantization": "fp8"}},
        "engines": engines or {"vllm": {"flags": {"max-model-len": 32768}}, "sglang": {}},
        "profiles": {"p": {"data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 8}, "requests": 4}},
        "primary_profile": "p",
        "grids": {"g": {"blocks": blocks}},
    })


def test_knob_axes_cross_flag_axes_and_record_knobs():
    study = _study([{"engine": "vllm", "models": ["bf16"], "axes": {"performance-mode": [None, "throughput"]},
                     "knob_axes": {"prefix_caching": [False, True], "quantization": ["none", "fp8"]}}])
    trials = expand(study, "g")
    assert len(trials) == 8
    assert {t.model for t in trials} == {"org/m", "org/m-FP8"}
    fp8 = [t for t in trials if t.model == "org/m-FP8"]
    assert all(t.model_key == "fp8" and t.knobs["quantization"] == "fp8" and "quantization" not in t.flags
               for t in fp8)
    on = [t for t in trials if t.knobs["prefix_caching"]]
    assert all(t.flags["enable-prefix-caching"] is True for t in on)


def test_trial_id_depends_on_the_flags_the_engine_gets_not_on_how_they_were_written():
    by_knob = expand(_study([{"engine": "vllm", "models": ["bf16"],
                              "knobs": {"quantization": "fp8", "prefix_caching": True}}]), "g")[0]
    by_flag = expand(_study([{"engine": "vllm", "models": ["fp8"], "flags": {"enable-prefix-caching": True}}]), "g")[0]
    assert by_knob.id == by_flag.id == trial_id("vllm", "org/m-FP8", {"max-model-len": 32768,
                                                                        "enable-prefix-caching": True})
    assert by_flag.knobs == {}


def test_seed_grid_ids_are_unchanged_by_knob_support():
    # Recorded before knobs existed: a trial without knobs keeps its id (resume, MLflow history).
    ids = {t.name: t.id for t in expand(load_study(), "seed")}
    assert ids == {
        "engine_vllm_default": "vllm-64ca1829", "engine_sglang_default": "sglang-eb9d7409",
        "step1_quant_fp8": "vllm-01ec2fea", "step2_prefix_cache": "vllm-bc0d36da",
        "step3_performance_mode": "vllm-566c8775", "step4_kv_cache_fp8": "vllm-258ec7b2",
        "step_spec_decoding_mtp4": "vllm-561f5fa9",
    }


def test_null_knob_value_means_engine_default():
    trials = expand(_study([{"engine": "sglang", "models": ["bf16"],
                             "knob_axes": {"max_running_requests": [None, 256]}}]), "g")
    assert [t.flags for t in trials] == [{}, {"max-running-requests": 256}]
    assert trials[0].knobs == {}


def test_exclude_rules_match_knob_values():
    trials = expand(_study([{"engine": "vllm", "models": ["bf16"],
                             "knob_axes": {"tensor_parallel": [1, 2], "expert_parallel": [False, True]},
                             "exclude": [{"tensor_parallel": 1, "expert_parallel": True}]}]), "g")
    assert len(trials) == 3
    assert max(t.gpus for t in trials) == 2


def test_inexpressible_knob_is_an_error_naming_the_grid_key():
    study = _study([{"engine": "sglang", "models": ["bf16"], "knobs": {"prefix_caching": True}},
                    {"engine": "vllm", "models": ["bf16"], "knob_axes": {"scheduling_policy": ["fcfs", "lpm"]}}])
    with pytest.raises(SpecError) as exc:
        expand(study, "g")
    assert exc.value.key == "grids.g.blocks[1].knob_axes.scheduling_policy"
    assert "engine 'vllm' cannot express scheduling_policy=lpm" in exc.value.reason


@pytest.mark.parametrize("skip_at", ["block_true", "block_list", "engine"])
def test_skip_unsupported_drops_only_that_engines_value(skip_at):
    block = {"engine": "vllm", "models": ["bf16"], "knob_axes": {"scheduling_policy": ["fcfs", "lpm"]}}
    engines = None
    if skip_at == "block_true":
        block["skip_unsupported"] = True
    elif skip_at == "block_list":
        block["skip_unsupported"] = ["scheduling_policy"]
    else:
        engines = {"vllm": {"skip_unsupported": ["scheduling_policy"]}, "sglang": {}}
    sglang = {"engine": "sglang", "models": ["bf16"], "knob_axes": {"scheduling_policy": ["fcfs", "lpm"]}}
    trials = expand(_study([block, sglang], engines=engines), "g")
    assert [(t.engine, t.knobs["scheduling_policy"]) for t in trials] == [
        ("vllm", "fcfs"), ("sglang", "fcfs"), ("sglang", "lpm")]


def test_skip_list_does_not_cover_other_knobs():
    study = _study([{"engine": "vllm", "models": ["bf16"], "skip_unsupported": ["kv_offload"],
                     "knobs": {"scheduling_policy": "lpm"}}])
    with pytest.raises(SpecError, match="scheduling_policy"):
        expand(study, "g")


def test_knob_that_sets_a_flag_the_engine_already_sets_is_an_error():
    study = _study([{"engine": "vllm", "models": ["bf16"], "knobs": {"max_model_len": 8192}}])
    with pytest.raises(SpecError) as exc:
        expand(study, "g")
    assert exc.value.key == "grids.g.blocks[0].knobs.max_model_len"
    assert "engines.vllm.flags already sets --max-model-len" in exc.value.reason


def test_knob_contradicting_a_block_flag_is_an_error():
    study = _study([{"engine": "vllm", "models": ["bf16"], "flags": {"enable-prefix-caching": True},
                     "knobs": {"prefix_caching": False}}])
    with pytest.raises(SpecError, match="already sets --enable-prefix-caching"):
        expand(study, "g")


def test_knob_given_in_knobs_and_knob_axes_is_an_error():
    with pytest.raises(ValueError, match="given twice"):
        _study([{"engine": "vllm", "models": ["bf16"], "knobs": {"prefix_caching": True},
                 "knob_axes": {"prefix_caching": [False]}}])


def test_unknown_knob_in_a_study_file_names_the_key(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("""
name: t
models: {m: org/m}
engines: {vllm: {}}
profiles: {p: {data: {kind: synthetic, prompt_tokens: 8, output_tokens: 8}, requests: 4}}
primary_profile: p
grids:
  g:
    blocks:
      - {engine: vllm, models: [m], knob_axes: {prefix_cache: [true]}}
""")
    with pytest.raises(SpecError) as exc:
        load_study(path)
    assert exc.value.key == "grids.g.blocks[0].knob_axes"
    assert "unknown knob" in exc.value.reason and "prefix_cache" in exc.value.reason


def test_ray_variables_in_engine_env_are_refused():
    with pytest.raises(ValueError, match="RAY_ADDRESS: RAY_"):
        _study([{"engine": "vllm", "models": ["bf16"]}],
               engines={"vllm": {"env": {"RAY_ADDRESS": "auto"}}, "sglang": {}})


@pytest.mark.parametrize("block_model, quantization, expected", [
    ("bf16", None, ("bf16", None)),
    ("bf16", "fp8", ("fp8", None)),       # the study's FP8 export
    ("fp8", "fp8", ("fp8", None)),
    ("fp8", "none", ("bf16", None)),      # back to the unquantized base
    ("bf16", "none", ("bf16", None)),
    ("bf16", "bitsandbytes", ("bf16", "bitsandbytes")),  # no variant: the engine quantizes online
])
def test_quantization_picks_a_model_variant_or_the_engine_flag(block_model, quantization, expected):
    assert resolve_quantization(_study([{"engine": "vllm", "models": ["bf16"]}]), block_model, quantization) == expected


def test_quantization_on_an_already_quantized_model_without_that_variant_is_an_error():
    with pytest.raises(KnobError, match="already fp8-quantized"):
        resolve_quantization(_study([{"engine": "vllm", "models": ["bf16"]}]), "fp8", "awq")
    lone = _study([{"engine": "vllm", "models": ["q"]}], models={"q": {"name": "org/q", "quantization": "fp8"}})
    with pytest.raises(KnobError, match="no unquantized variant"):
        resolve_quantization(lone, "q", "none")


# ---------------------------------------------------------------------------------------
# The seed's configurations rebuilt from knobs: same executable, model and set of flags

# Each seed run as knobs (plus the raw flags no knob covers). The seed's required flags are the
# engines' own (`engines.*.flags` of the default study).
SEED_AS_KNOBS = {
    "engine_vllm_default": ("vllm", {}, {}),
    "engine_sglang_default": ("sglang", {}, {}),
    "step1_quant_fp8": ("vllm", {"quantization": "fp8"}, {}),
    "step2_prefix_cache": ("vllm", {"quantization": "fp8", "prefix_caching": True}, {}),
    "step3_performance_mode": ("vllm", {"quantization": "fp8", "prefix_caching": True},
                               {"performance-mode": "throughput"}),
    "step4_kv_cache_fp8": ("vllm", {"quantization": "fp8", "prefix_caching": True, "kv_cache_dtype": "fp8"},
                           {"performance-mode": "throughput"}),
    "step_spec_decoding_mtp4": ("vllm", {"quantization": "fp8", "speculative": MTP4}, {}),
}


def _seed_runs() -> dict[str, dict]:
    runs = json.loads((FIXTURES / "seed-results.json").read_text())["runs"]
    return {r["id"]: r for r in runs if r["id"] in SEED_AS_KNOBS}


@pytest.fixture(scope="module")
def knob_study() -> Study:
    base = load_study()
    blocks = [{"engine": engine, "models": ["bf16"], "knobs": knobs, "flags": flags, "name": name}
              for name, (engine, knobs, flags) in SEED_AS_KNOBS.items()]
    return base.model_copy(update={"grids": {"seed_knobs": base.grids["seed"].model_copy(
        update={"blocks": [type(base.grids["seed"].blocks[0]).model_validate(b) for b in blocks], "ordered": False})}})


@pytest.mark.parametrize("name", list(SEED_AS_KNOBS))
def test_seed_configuration_from_knobs(knob_study, name):
    seed_run = _seed_runs()[name]
    trial = next(t for t in expand(knob_study, "seed_knobs") if t.name == name)
    engine = get_engine(trial.engine)
    spec = knob_study.engines[trial.engine]
    command = engine.serve_command(spec, trial).split(" ")
    executable = {"vllm": ["vllm", "serve"], "sglang": ["python", "-m", "sglang.launch_server"]}[seed_run["engine"]]
    assert command[: len(executable)] == executable
    assert trial.engine == seed_run["engine"] and trial.model == seed_run["model"]
    flags = [a for a in engine.serve_args(trial) if a.startswith("--") and not a.startswith("--model-path")]
    assert set(flags) == set(seed_run["flags"]), name


def test_seed_configurations_from_knobs_are_the_seed_grids_trials(knob_study):
    by_knobs = {t.name: t.id for t in expand(knob_study, "seed_knobs")}
    by_flags = {t.name: t.id for t in expand(load_study(), "seed")}
    assert by_knobs == by_flags


def test_fixture_seed_runs_match_the_shared_reference():
    shared = {r["id"]: (r["engine"], r["model"], sorted(r["flags"])) for r in json.loads(shared_file("reference/seed-results.json").read_text())["runs"]}
    for name, run in _seed_runs().items():
        assert shared[name] == (run["engine"], run["model"], sorted(run["flags"]))


# ---------------------------------------------------------------------------------------
# The default study's knob grids and their cost


def test_full_grid_covers_both_engines_on_equal_terms():
    trials = expand(load_study(), "full")
    knob_names = {k for t in trials for k in t.knobs}
    assert {"quantization", "prefix_caching", "kv_cache_dtype", "speculative", "max_running_requests",
            "max_batched_tokens", "cuda_graph", "gpu_memory_fraction", "kv_offload"} <= knob_names
    per_engine = {e: {tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in t.knobs.items()))
                      for t in trials if t.engine == e} for e in ("vllm", "sglang")}
    # Every knob combination SGLang runs, vLLM runs too (vLLM also sweeps its performance mode).
    assert per_engine["sglang"] <= per_engine["vllm"]
    assert {t.model for t in trials} == {"Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.5-35B-A3B-FP8"}
    assert all(t.gpus == 1 for t in trials)
    assert all(t.profiles == ["sharegpt", "throughput", "long_context", "generation_heavy"] for t in trials)


def test_tp_grid_layouts():
    trials = expand(load_study(), "tp")
    layouts = {(t.engine, t.knobs.get("tensor_parallel"), t.knobs.get("data_parallel"), t.knobs.get("expert_parallel"))
               for t in trials}
    for engine in ("vllm", "sglang"):
        assert {(tp, dp, ep) for e, tp, dp, ep in layouts if e == engine} == {
            (1, 1, False), (2, 1, False), (1, 2, False), (2, 1, True), (1, 2, True)}
    assert {t.gpus for t in trials} == {1, 2}
    for t in trials:
        if t.engine == "vllm" and t.gpus > 1:
            assert "--distributed-executor-backend=mp" in get_engine("vllm").serve_args(t)


def test_grid_cost_counts_starts_runs_and_gpus():
    study = _study([{"engine": "vllm", "models": ["bf16"], "knob_axes": {"tensor_parallel": [1, 2]}},
                    {"engine": "sglang", "models": ["bf16"]}])
    cost = grid_cost(study, "g", durations={"p": 100.0}, run_overhead_s=10.0)
    vllm_start, sglang_start = get_engine("vllm").start_overhead_s, get_engine("sglang").start_overhead_s
    assert (cost.trials, cost.runs, cost.gpus_max) == (3, 3, 2)
    assert cost.trials_by_engine == {"vllm": 2, "sglang": 1}
    expected_gpu_s = (vllm_start + 110) * 1 + (vllm_start + 110) * 2 + (sglang_start + 110) * 1
    assert cost.gpu_hours == pytest.approx(expected_gpu_s / 3600, abs=0.01)
    assert cost.profile_sources["p"].startswith("seed-results.json")
    assert "3 trials" in cost.line()


def test_grid_cost_starts_a_compile_group_cold_once_and_warm_after():
    # max_running_requests does not change what vLLM compiles: one group, one cold start;
    # prefix caching on and off neither; FP8 compiles another graph: a second cold start.
    study = _study([{"engine": "vllm", "models": ["bf16"],
                     "knob_axes": {"max_running_requests": [None, 256, 512], "quantization": ["none", "fp8"]}}])
    trials = expand(study, "g")
    keys = {get_engine("vllm").compile_key(t.model, t.all_flags, t.weights) for t in trials}
    cold, warm = get_engine("vllm").start_estimate_s({})
    cost = grid_cost(study, "g", durations={"p": 100.0}, run_overhead_s=10.0, trials=trials)
    assert cost.cold_starts == len(keys) == 2
    assert cost.gpu_hours == pytest.approx((2 * cold + 4 * warm + 6 * 110) / 3600, abs=0.01)
    # measured starts (an earlier sweep's, cold and warm apart) replace the estimates
    starts = MeasuredDurations(source="earlier", runs=6, start_s={"vllm": 200.0}, cold_start_s={"vllm": 300.0},
                               warm_start_s={"vllm": 60.0}, profile_s={})
    measured = grid_cost(study, "g", durations={"p": 100.0}, run_overhead_s=10.0, trials=trials, measured=starts)
    assert (measured.start_overhead_s, measured.warm_start_s) == ({"vllm": 300.0}, {"vllm": 60.0})
    assert measured.gpu_hours == pytest.approx((2 * 300 + 4 * 60 + 6 * 110) / 3600, abs=0.01)


def test_default_study_costs_use_the_seed_durations():
    study = load_study()
    costs = grid_costs(study)
    assert set(costs) == set(study.grids)
    full = costs["full"]
    assert full.profile_seconds == SEED_PROFILE_SECONDS
    assert full.trials == len(expand(study, "full")) and full.runs == 4 * full.trials
    assert costs["tp"].gpus_max == 2 and costs["tp"].gpu_hours > 0
    # The seed's own durations, from its results: the estimate is never below a measured run.
    runs = json.loads((FIXTURES / "seed-results.json").read_text())["runs"]
    for run in runs:
        assert run["metrics"]["duration_s"] <= SEED_PROFILE_SECONDS[run["profile"]]
