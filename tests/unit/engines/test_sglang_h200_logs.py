"""SGLang 0.5.16 on the H200, from what it printed there (bench/h200/engine-logs/, captured by
farm's own sweep and by scripts/h200/start-only.py on the weight-free Qwen3.5-35B-A3B): its
capacity lines read into a trial's record, the phases of its start, its failure lines, and its
`--help`, against which every flag farm renders for SGLang is checked.

The failure lines SGLang did not print on the H200 (out of memory, bad arguments) stay in the
constructed excerpts of tests/fixtures/engine-logs/sglang-0.5.16-h200-constructed/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from farm.engines import get_engine
from farm.study.grid import expand
from farm.study.load import load_study
from tests.shape_config import SGLANG_STARTS, command_flags, shape_model_config

ROOT = Path(__file__).resolve().parents[3]
H200 = ROOT / "bench" / "h200" / "engine-logs"
CONSTRUCTED = ROOT / "tests" / "fixtures" / "engine-logs" / "sglang-0.5.16-h200-constructed"
HELP = ROOT / "farm" / "engines" / "facts" / "sglang-0.5.16-help.txt"
DEFAULT = H200 / "sglang-0.5.16-default-dummy-cold-start.log"
MRR512 = H200 / "sglang-0.5.16-max-running-512-dummy-warm-start.log"
FP8 = H200 / "sglang-0.5.16-fp8-dummy-warm-start.log"
MRR512_NO_RADIX = H200 / "sglang-0.5.16-max-running-512-radix-off-dummy-start-stopped.log"
NO_PROCESSOR = H200 / "sglang-0.5.16-no-image-processor.log"
# 2026-12-03: the 512-radix-off trial's own start, and FP8 with the radix cache off (start only)
MRR512_NO_RADIX_TRIAL = H200 / "sglang-0.5.16-max-running-512-radix-off-dummy-cold-start.log"
FP8_NO_RADIX = H200 / "sglang-0.5.16-fp8-radix-off-dummy-start-only.log"
# 2026-12-03 (afternoon): the FP8 trial's own start (cold), and FP8 with the radix cache off as a
# trial (warm: the same compile group had just started on that node)
FP8_TRIAL = H200 / "sglang-0.5.16-fp8-dummy-cold-start.log"
FP8_NO_RADIX_TRIAL = H200 / "sglang-0.5.16-fp8-radix-off-dummy-warm-start.log"
# 2026-12-03 (evening): the FP8-weights, FP8-KV-cache trial's start (cold), and the 256-radix-off
# trial's (cold; the machine was lost during its runs, so this start is all it left)
FP8_KV_FP8_TRIAL = H200 / "sglang-0.5.16-fp8-kv-cache-fp8-dummy-cold-start.log"
MRR256_NO_RADIX_START = H200 / "sglang-0.5.16-max-running-256-radix-off-dummy-cold-start.log"
# 2026-12-04: the FP8-KV group's start on a fresh machine from the pack carried there (start only),
# and 256 and 512 with the radix cache on, started by their trials and ended as the default's server
FP8_KV_FP8_CARRIED = H200 / "sglang-0.5.16-fp8-kv-cache-fp8-dummy-carried-warm-start.log"
MRR256_SAME = H200 / "sglang-0.5.16-max-running-256-dummy-same-server-warm-start.log"
MRR512_SAME = H200 / "sglang-0.5.16-max-running-512-dummy-same-server-warm-start.log"
sglang = get_engine("sglang")


@pytest.mark.parametrize("log, expected", [
    (DEFAULT, {"mamba_cache_size": 398, "kv_cache_tokens": 1_392_614, "max_total_num_tokens": 1_392_614,
               "kv_cache_torch_dtype": "bfloat16", "kv_cache_dtype": "auto", "max_batched_tokens": 8192,
               "max_prefill_tokens": 16384, "max_running_requests": 79, "max_model_len": 32768,
               "prefix_caching": True, "cuda_graph": True, "cuda_graph_max_size": 79}),
    # asked 512 with the radix cache on: SGLang caps it to what its 398 mamba slots allow
    (MRR512, {"mamba_cache_size": 398, "max_running_requests": 79, "max_running_requests_requested": 512,
              "prefix_caching": True}),
    # FP8 weights leave more memory to the caches: 643 mamba slots, 128 requests, 2.25 M KV tokens
    (FP8, {"mamba_cache_size": 643, "kv_cache_tokens": 2_248_855, "max_running_requests": 128,
           "quantization": "fp8", "cuda_graph_max_size": 128}),
    # with the radix cache off the mamba cache is sized from --max-running-requests (512); the
    # start was stopped in its CUDA-graph capture, before the summary line
    (MRR512_NO_RADIX, {"mamba_cache_size": 512, "kv_cache_tokens": 1_034_198, "prefix_caching": False,
                       "cuda_graph_max_size": 256, "max_running_requests": None}),
    # the same configuration's trial, started to the end: SGLang keeps all 512 requests at once
    (MRR512_NO_RADIX_TRIAL, {"mamba_cache_size": 512, "kv_cache_tokens": 1_034_198, "max_running_requests": 512,
                             "prefix_caching": False}),
    # FP8 weights with the radix cache off: the mamba cache sized from the memory (643 slots) sets
    # the requests at once, five times SGLang's default 128 with FP8
    (FP8_NO_RADIX, {"mamba_cache_size": 643, "kv_cache_tokens": 2_248_855, "max_running_requests": 643,
                    "prefix_caching": False, "quantization": "fp8", "cuda_graph_max_size": 256}),
    # the trials themselves, started to the end, say the same as the start-only runs before them
    (FP8_TRIAL, {"mamba_cache_size": 643, "kv_cache_tokens": 2_248_855, "max_running_requests": 128,
                 "prefix_caching": True, "quantization": "fp8"}),
    (FP8_NO_RADIX_TRIAL, {"mamba_cache_size": 643, "kv_cache_tokens": 2_248_855, "max_running_requests": 643,
                          "prefix_caching": False, "quantization": "fp8"}),
    # an FP8 KV cache holds twice the tokens in the same memory (4.50 M against 2.25 M); the mamba
    # slots (643) still cap the radix-on requests at 128
    (FP8_KV_FP8_TRIAL, {"mamba_cache_size": 643, "kv_cache_tokens": 4_497_711, "kv_cache_torch_dtype": "float8_e4m3fn",
                        "kv_cache_dtype": "fp8_e4m3", "max_running_requests": 128, "prefix_caching": True,
                        "quantization": "fp8"}),
    # BF16 weights, radix off, 256 asked: 256 mamba slots and all 256 requests at once
    (MRR256_NO_RADIX_START, {"mamba_cache_size": 256, "kv_cache_tokens": 1_839_062, "max_running_requests": 256,
                             "prefix_caching": False, "cuda_graph_max_size": 256}),
    # from a carried pack the same group states the same limits as its cold start
    (FP8_KV_FP8_CARRIED, {"mamba_cache_size": 643, "kv_cache_tokens": 4_497_711, "max_running_requests": 128,
                          "kv_cache_dtype": "fp8_e4m3", "prefix_caching": True}),
    # 256 and 512 asked with the radix cache on: capped to 79, every limit the default's (same_server)
    (MRR256_SAME, {"mamba_cache_size": 398, "kv_cache_tokens": 1_392_614, "max_running_requests": 79,
                   "max_running_requests_requested": 256, "max_batched_tokens": 8192, "prefix_caching": True}),
    (MRR512_SAME, {"mamba_cache_size": 398, "kv_cache_tokens": 1_392_614, "max_running_requests": 79,
                   "max_running_requests_requested": 512, "max_batched_tokens": 8192, "prefix_caching": True}),
])
def test_capacity_lines(log, expected):
    got = sglang.reported_capacity(log.read_text())
    assert {k: got.get(k) for k in expected} == expected
    if log not in (MRR512, MRR256_SAME, MRR512_SAME):
        assert "max_running_requests_requested" not in got


def test_kv_cache_memory_and_concurrency_at_max_len():
    got = sglang.reported_capacity(DEFAULT.read_text())
    assert got["kv_cache_memory_gib"] == 26.56 and got["mamba_cache_memory_gib"] == 23.93
    assert got["max_concurrency_at_max_len"] == round(1_392_614 / 32768, 2)
    assert got["cuda_graph_sizes"][:4] == [1, 2, 4, 8] and got["cuda_graph_sizes"][-1] == 79


def test_start_up_phases():
    # The cold start's two minutes went to capturing prefill CUDA graphs; the warm ones took 22-41 s.
    assert sglang.reported_startup(DEFAULT.read_text()) == {
        "model_memory_gib": 65.67, "model_load_s": 0.35, "cuda_graph_capture_s": 11.7, "cuda_graph_memory_gib": 0.15,
        "prefill_cuda_graph_capture_s": 121.73, "moe_config": "default",
        "moe_config_files": {"E=256,N=512,device_name=NVIDIA_H200.json": "default",
                             "E=256,N=512,device_name=NVIDIA_H200_down.json": "default"}}
    assert sglang.reported_startup(MRR512.read_text())["prefill_cuda_graph_capture_s"] == 22.0
    assert sglang.reported_startup(FP8.read_text())["model_memory_gib"] == 34.66
    # The FP8-KV group: cold 101.6 s of prefill graphs; from the pack carried to a fresh machine 54.1 s
    # (the FP8 group warm on the node that compiled it: 20.5 s); decode graphs 15.8 s -> 7.0 s.
    cold, carried = (sglang.reported_startup(p.read_text()) for p in (FP8_KV_FP8_TRIAL, FP8_KV_FP8_CARRIED))
    assert (cold["prefill_cuda_graph_capture_s"], carried["prefill_cuda_graph_capture_s"]) == (101.63, 54.11)
    assert (cold["cuda_graph_capture_s"], carried["cuda_graph_capture_s"]) == (15.8, 7.0)


@pytest.mark.parametrize("name", SGLANG_STARTS)
def test_the_default_mem_fraction_static_is_sglangs_own_rule(name):
    # SGLang 0.5.16's rule (server_args.py `_handle_gpu_memory_settings`), from each start's exact
    # flags, the H200's 143,771 MiB and the shape model's config (its vision tower shrinks the
    # fraction): what the ServerArgs line of the log says it chose, to the last digit.
    from farm.analysis.memory_fit import GPU_MEMORY_BYTES

    flags = command_flags(H200 / f"sglang-0.5.16-{name}.command.txt")
    logged = sglang.reported_capacity((H200 / f"sglang-0.5.16-{name}.log").read_text())["gpu_memory_fraction"]
    assert sglang.default_memory_fraction(flags, GPU_MEMORY_BYTES["H200"], shape_model_config()) == pytest.approx(
        logged, abs=1e-12)


def test_the_older_formats_still_read():
    # SGLang 0.4.x-0.5.9 wrote the KV line without the dtype and the graph sizes on their own line.
    text = ("[2025-01-01 00:00:00 TP0] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB\n"
            "[2025-01-01 00:00:01 TP0] Capture cuda graph bs [1, 2, 4]\n")
    got = sglang.reported_capacity(text)
    assert got["kv_cache_tokens"] == 1000 and got["kv_cache_memory_gib"] == 2.0 and got["cuda_graph_sizes"] == [1, 2, 4]


@pytest.mark.parametrize("log, status, needle", [
    (DEFAULT, None, None),
    (MRR512, None, None),
    (FP8, None, None),
    (MRR512_NO_RADIX, None, None),
    # the first start on the H200: the shape model had no preprocessor_config.json yet
    (NO_PROCESSOR, "engine_failed_to_start", "Can't load image processor for '/tmp/farm-h200/src/.models/"),
    (CONSTRUCTED / "sglang-0.5.16-not-enough-memory.log", "oom", "Please try to increase --mem-fraction-static"),
    (CONSTRUCTED / "sglang-0.5.16-invalid-attention-backend.log", "invalid_flags", "invalid choice: 'FLASH_ATTN'"),
    (CONSTRUCTED / "sglang-0.5.16-unrecognized-arguments.log", "invalid_flags", "--gdn-prefill-backend=triton"),
])
def test_failure_lines(log, status, needle):
    failure = sglang.classify(log.read_text())
    if status is None:
        assert failure is None
    else:
        assert failure is not None and failure.status == status and needle in failure.line


@pytest.mark.parametrize("line, status", [
    ("RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
     "max_mamba_cache_size=2, mamba_ratio=5, resulting max_num_reqs=0.", "oom"),
    ("Exception: Capture cuda graph failed: CUDA error: out of memory", "oom"),
    ("Exception: Capture cuda graph failed: an illegal memory access was encountered", "engine_failed_to_start"),
])
def test_failure_lines_of_0_5_16_source(line, status):
    # The messages as SGLang 0.5.16's source raises them (kv_cache_configurator.py:1645,
    # decode_cuda_graph_runner.py:410); an out-of-memory cause wins over the capture failure.
    assert sglang.classify(f"[2026-12-01 10:00:12] {line}\n").status == status


# -- every flag farm gives SGLang exists in the H200 bundle's SGLang ------------------------

def _help_options() -> set[str]:
    return set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", HELP.read_text()))


def _study_flags() -> dict[str, str]:
    """Every --flag of every SGLang trial in the studies' grids -> one trial that renders it."""
    seen: dict[str, str] = {}
    for config in ("configs/h200-dummy.yaml", "configs/qwen3.5-35b-a3b-h200.yaml"):
        study = load_study(ROOT / config)
        for grid in study.grids:
            for t in expand(study, grid):
                if t.engine != "sglang":
                    continue
                for arg in sglang.serve_args(t):
                    if arg.startswith("--"):
                        seen.setdefault(arg.partition("=")[0], f"{config} grid {grid}: {t.label}")
    return seen


def test_the_help_is_sglang_0_5_16s():
    text = HELP.read_text()
    assert "usage: sglang serve" in text and "--max-running-requests" in text and len(_help_options()) > 300


def test_every_flag_the_studies_render_is_in_sglang_help():
    options = _help_options()
    flags = _study_flags()
    assert {"--model-path", "--load-format", "--max-running-requests", "--disable-radix-cache",
            "--quantization", "--kv-cache-dtype", "--tp-size"} <= set(flags)
    missing = {f: where for f, where in flags.items() if f not in options}
    assert missing == {}


@pytest.mark.parametrize("knob, value", [
    ("quantization", "fp8"), ("prefix_caching", False), ("kv_cache_dtype", "fp8"), ("max_running_requests", 256),
    ("max_batched_tokens", 16384), ("gpu_memory_fraction", 0.85), ("cuda_graph", False), ("tensor_parallel", 2),
    ("data_parallel", 2), ("expert_parallel", True), ("max_model_len", 32768), ("scheduling_policy", "lpm"),
    ("kv_offload", 16),
])
def test_every_knob_renders_flags_sglang_knows(knob, value):
    knobs = {knob: value, **({"tensor_parallel": 2} if knob == "expert_parallel" else {})}
    rendered = sglang.render_knobs(knobs)
    assert rendered and {f"--{name}" for name in rendered} <= _help_options()
