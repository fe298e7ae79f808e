"""SGLang 0.5.16's start-up lines on the H200, read into a trial's record: its capacity (mamba
cache, KV-cache tokens and dtype, the summary line, the effective max_running_requests), the
phases of its start, and its failure lines.

The logs are CONSTRUCTED (tests/fixtures/engine-logs/sglang-0.5.16-h200-constructed/README.md):
the numbers h200.md quotes from SGLang's log on the H200, in the format strings of SGLang
0.5.16's source. The GPU session swaps them for the real start-up logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.engines import get_engine

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "engine-logs" / "sglang-0.5.16-h200-constructed"
DEFAULT = LOGS / "sglang-0.5.16-default.log"
MRR512 = LOGS / "sglang-0.5.16-max-running-512.log"
MRR512_NO_RADIX = LOGS / "sglang-0.5.16-max-running-512-radix-off.log"
sglang = get_engine("sglang")


@pytest.mark.parametrize("log, expected", [
    (DEFAULT, {"mamba_cache_size": 416, "kv_cache_tokens": 1_454_242, "max_total_num_tokens": 1_454_242,
               "kv_cache_torch_dtype": "bfloat16", "kv_cache_dtype": "auto", "max_batched_tokens": 8192,
               "max_prefill_tokens": 16384, "max_running_requests": 83, "max_model_len": 32768,
               "prefix_caching": True, "cuda_graph": True, "cuda_graph_max_size": 83}),
    # asked 512 with the radix cache on: SGLang caps it to what 416 mamba slots allow
    (MRR512, {"mamba_cache_size": 416, "max_running_requests": 83, "max_running_requests_requested": 512,
              "prefix_caching": True}),
    # with the radix cache off, the mamba cache is sized from --max-running-requests: 512 run
    (MRR512_NO_RADIX, {"mamba_cache_size": 512, "max_running_requests": 512, "prefix_caching": False,
                       "cuda_graph_max_size": 512}),
])
def test_capacity_lines(log, expected):
    got = sglang.reported_capacity(log.read_text())
    assert {k: got.get(k) for k in expected} == expected
    if log is not MRR512:
        assert "max_running_requests_requested" not in got


def test_kv_cache_memory_and_concurrency_at_max_len():
    got = sglang.reported_capacity(DEFAULT.read_text())
    assert got["kv_cache_memory_gib"] == 27.74 and got["mamba_cache_memory_gib"] == 18.67
    assert got["max_concurrency_at_max_len"] == round(1_454_242 / 32768, 2)
    assert got["cuda_graph_sizes"][:4] == [1, 2, 4, 8]


def test_start_up_phases():
    assert sglang.reported_startup(DEFAULT.read_text()) == {
        "model_memory_gib": 66.81, "model_load_s": 1.02, "cuda_graph_capture_s": 28.13, "cuda_graph_memory_gib": 1.21}


def test_the_older_formats_still_read():
    # SGLang 0.4.x-0.5.9 wrote the KV line without the dtype and the graph sizes on their own line.
    text = ("[2025-01-01 00:00:00 TP0] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB\n"
            "[2025-01-01 00:00:01 TP0] Capture cuda graph bs [1, 2, 4]\n")
    got = sglang.reported_capacity(text)
    assert got["kv_cache_tokens"] == 1000 and got["kv_cache_memory_gib"] == 2.0 and got["cuda_graph_sizes"] == [1, 2, 4]


@pytest.mark.parametrize("name, status, needle", [
    ("sglang-0.5.16-default.log", None, None),
    ("sglang-0.5.16-max-running-512.log", None, None),
    ("sglang-0.5.16-max-running-512-radix-off.log", None, None),
    ("sglang-0.5.16-not-enough-memory.log", "oom", "Please try to increase --mem-fraction-static"),
    ("sglang-0.5.16-invalid-attention-backend.log", "invalid_flags", "invalid choice: 'FLASH_ATTN'"),
    ("sglang-0.5.16-unrecognized-arguments.log", "invalid_flags", "--gdn-prefill-backend=triton"),
])
def test_failure_lines(name, status, needle):
    failure = sglang.classify((LOGS / name).read_text())
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
