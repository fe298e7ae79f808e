"""What vLLM 0.20.2 wrote on the lent H200 (bench/h200/engine-logs/, the start-up sections of the
engine logs farm kept) is read into each trial's record: its capacity, the phases of its start, and
the warnings that matter for the numbers (which MoE kernel config ran: the default, no tuned file for this GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.engines import get_engine

LOGS = Path(__file__).resolve().parents[3] / "bench" / "h200" / "engine-logs"
BF16 = LOGS / "vllm-0.20.2-bf16-dummy-cold-start.log"
FP8 = LOGS / "vllm-0.20.2-fp8-prefix-throughput-dummy-cold-start.log"
# step1_quant_fp8: FP8 at vLLM's default batch budget, started right after step3 on the same machine
FP8_DEFAULT = LOGS / "vllm-0.20.2-fp8-dummy-cold-start.log"
vllm = get_engine("vllm")


@pytest.mark.parametrize("log, expected", [
    (BF16, {"kv_cache_tokens": 2_747_830, "max_concurrency_at_max_len": 83.86, "max_model_len": 32768,
            "kv_cache_memory_gib": 59.13, "prefix_caching": False, "max_batched_tokens": 8192,
            "cuda_graph_max_size": 512, "cuda_graph": True}),
    # online FP8 halves the weights (33 GiB), so the KV cache grows; performance-mode throughput
    # doubles the batch token budget
    (FP8, {"kv_cache_tokens": 3_694_160, "max_concurrency_at_max_len": 112.74, "kv_cache_memory_gib": 86.29,
           "prefix_caching": True, "quantization": "fp8", "max_batched_tokens": 16384}),
    # the default batch budget (8192) reserves less activation memory than performance mode's 16384:
    # 3.9 GiB more for the KV cache, 495,462 tokens more
    (FP8_DEFAULT, {"kv_cache_tokens": 4_189_622, "max_concurrency_at_max_len": 127.86, "kv_cache_memory_gib": 90.15,
                   "prefix_caching": False, "quantization": "fp8", "max_batched_tokens": 8192}),
])
def test_capacity_from_the_h200_log(log, expected):
    got = vllm.reported_capacity(log.read_text())
    assert {k: got.get(k) for k in expected} == expected
    assert ("quantization" in got) == (log is not BF16)


@pytest.mark.parametrize("log, expected", [
    (BF16, {"model_memory_gib": 64.69, "model_load_s": 0.943031, "compile_s": 55.68, "init_engine_s": 176.85,
            "profile_run_s": 81.65, "cuda_graph_capture_s": 25.0, "cuda_graph_memory_gib": 1.06,
            "moe_config": "default", "moe_config_files": {"E=256,N=512,device_name=NVIDIA_H200.json": "default"}, "compile_cache_hit": False}),
    (FP8, {"model_memory_gib": 33.37, "model_load_s": 2.42378, "compile_s": 75.48, "init_engine_s": 210.78,
           "profile_run_s": 93.08, "cuda_graph_capture_s": 28.0, "cuda_graph_memory_gib": 1.27,
           "moe_config": "default", "moe_config_files": {"E=256,N=512,device_name=NVIDIA_H200,dtype=fp8_w8a8.json": "default"}, "compile_cache_hit": False}),
    # step3's compiled graph (range 1..16384) was in the machine's cache, but this start compiles
    # range 1..8192: a different batch budget is a cold compile
    (FP8_DEFAULT, {"model_memory_gib": 33.37, "model_load_s": 3.00302, "compile_s": 85.85, "init_engine_s": 223.52,
                   "profile_run_s": 91.34, "cuda_graph_capture_s": 30.0, "cuda_graph_memory_gib": 1.27,
                   "moe_config": "default", "moe_config_files": {"E=256,N=512,device_name=NVIDIA_H200,dtype=fp8_w8a8.json": "default"}, "compile_cache_hit": False}),
])
def test_start_up_phases_from_the_h200_log(log, expected):
    assert vllm.reported_startup(log.read_text()) == expected


def test_a_warm_compile_cache_is_recognized():
    # A second start of the same configuration loads its compiled graph from VLLM_CACHE_ROOT.
    warm = BF16.read_text().replace(
        "Compiling a graph for compile range (1, 8192) takes 41.71 s",
        "Directly load the compiled graph(s) for compile range (1, 8192) from the cache, took 3.12 s")
    assert vllm.reported_startup(warm)["compile_cache_hit"] is True


def test_the_logs_carry_no_failure():
    for log in (BF16, FP8, FP8_DEFAULT):
        assert vllm.classify(log.read_text()) is None


def test_the_version_line_of_the_h200_log():
    assert "version 0.20.2" in BF16.read_text()
    assert vllm.parse_version("INFO 12-01 09:22:41 [__init__.py:216] Automatically detected platform cuda.\n0.20.2\n") \
        == "0.20.2"


# The H200's second sitting of 2026-12-02: step2 (FP8 + prefix caching), then step1 (FP8) on the
# same machine with the same node cache. vLLM put them in different compile-cache directories and
# compiled step1 cold: farm's compile groups must tell them apart (the scheduler and the estimate
# count a warm start for a group's second trial).
PASS2_STEP2 = LOGS / "vllm-0.20.2-fp8-prefix-dummy-pass2-fresh-machine-start.log"
PASS2_STEP1 = LOGS / "vllm-0.20.2-fp8-dummy-pass2-after-fp8-prefix-start.log"


def _compile_dir(log: Path) -> str:
    import re

    return re.search(r"torch_compile_cache/([0-9a-f]+)/", log.read_text()).group(1)


def _flags(command: Path) -> dict:
    argv = command.read_text().split()
    serve = argv.index("serve")
    out = {}
    for arg in argv[serve + 2:]:
        key, _, value = arg.removeprefix("--").partition("=")
        if key not in ("host", "port"):
            out[key] = value or True
    return out


def test_prefix_caching_is_its_own_compile_group_as_vllm_compiled_it():
    assert _compile_dir(PASS2_STEP2) != _compile_dir(PASS2_STEP1)
    assert "Compiling a graph for compile range (1, 8192)" in PASS2_STEP1.read_text()  # cold, not loaded
    step2 = _flags(PASS2_STEP2.with_name(PASS2_STEP2.name.replace(".log", ".command.txt")))
    step1 = _flags(PASS2_STEP1.with_name(PASS2_STEP1.name.replace(".log", ".command.txt")))
    assert step2.pop("enable-prefix-caching") is True and step1 == step2  # the one flag between them
    assert vllm.compile_key("m", {**step2, "enable-prefix-caching": True}) != vllm.compile_key("m", step1)
