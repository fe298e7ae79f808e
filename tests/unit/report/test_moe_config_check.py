"""A trial that ran its engine's default fused-MoE kernel config on a GPU is named in the report's
checks (issue 47 item 2), from the committed H200 seed sweep's real runs (vLLM 0.20.2 logged "Using
default MoE config" at every start); the appendix's Starts table says which config each start ran;
the results file a report writes keeps it, and a report of CPU runs says nothing of it."""

from __future__ import annotations

import json
import tarfile

from conftest import REPO, run_farm

SWEEP = "aa0e8ed837734ac3bb3a11f5178e8f9e"


def test_the_h200_trials_ran_the_default_moe_kernels_and_the_report_says_so(tmp_path):
    with tarfile.open(REPO / "bench/h200/store.tgz") as tar:
        tar.extractall(tmp_path, filter="data")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = run_farm("report", SWEEP, "--tracking-uri", uri, "--format", "markdown", "--out", str(tmp_path / "out"),
                   cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "`moe_default_config` x5" in out.stdout
    assert ("All 5: ran the engine's default fused-MoE kernel config on NVIDIA H200 (default): no tuned config for "
            "this expert shape and GPU came with the engine") in out.stdout
    appendix = (tmp_path / "out" / "appendix.md").read_text()
    assert "| Trial | Node | Engine start (s) | Compile cache | MoE kernel config |" in appendix
    assert "| engine_vllm_default | vm-1645b529 | 251 | cold | default |" in appendix
    # the results file the report wrote carries it, and a report of that file says the same
    written = json.loads((tmp_path / "out" / "results.json").read_text())
    # (a later pass stored without its start's facts says nothing of its start: never filled in)
    said = {(r["name"], r["provenance"].get("moe_config")) for r in written["runs"] if r["engine"] == "vllm"}
    assert {name for name, moe in said if moe == "default"} == {
        "engine_vllm_default", "step1_quant_fp8", "step2_prefix_cache", "step3_performance_mode", "step4_kv_cache_fp8"}
    assert {moe for _, moe in said} <= {"default", None}
    again = run_farm("analyze", "--results", str(tmp_path / "out" / "results.json"), "--format", "markdown",
                     "--config", str(REPO / "configs/h200-dummy.yaml"), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "`moe_default_config` x5" in again.stdout


def test_cpu_runs_say_nothing_of_moe_kernels():
    out = run_farm("analyze", "--results", str(REPO / "bench/vllm-cpu/from-command/results.json"), "--format", "markdown")
    assert out.returncode == 0, out.stderr
    assert "moe_default_config" not in out.stdout
