"""Every run record carries its engine start's phases, read from the engine's own log, and
whether the start was cold or warm; the report's GPU time splits the starts by phase."""

from __future__ import annotations

import json
import re

from conftest import REPO
from farm.analysis.results_file import read_results_file
from farm.analysis.gpu_time import gpu_time
from farm.analysis.start_phases import start_cache, start_phases
from farm.engines import get_engine

LOGS = REPO / "bench/h200/engine-logs"


def test_a_cold_h200_start_splits_into_the_phases_its_log_names():
    # step3 on 2026-12-01: 310 s from launch to ready (bench/h200/results.json)
    reported = get_engine("vllm").reported_startup((LOGS / "vllm-0.20.2-fp8-prefix-throughput-dummy-cold-start.log")
                                                    .read_text())
    phases = start_phases({**reported, "ready_s": 310.0})
    assert set(phases) >= {"weight_load", "compilation", "kernel_profiling", "cuda_graphs", "other"}
    assert phases["compilation"] == reported["compile_s"] and phases["cuda_graphs"] == reported["cuda_graph_capture_s"]
    assert abs(sum(phases.values()) - 310.0) < 0.05 and phases["other"] > 0
    assert start_cache(reported) == "cold"


def test_the_pass2_start_that_compiled_again_is_cold():
    # step1 after step2 on one machine: another compile-cache key, so vLLM compiled from scratch
    reported = get_engine("vllm").reported_startup((LOGS / "vllm-0.20.2-fp8-dummy-pass2-after-fp8-prefix-start.log")
                                                    .read_text())
    assert start_cache(reported) == "cold" and reported["compile_s"] > 50


def test_the_mocks_warm_start_says_so_and_a_start_not_timed_has_no_phases():
    mock = get_engine("mock")
    assert start_cache(mock.reported_startup("farm mock: compile cache warm\n")) == "warm"
    assert start_cache(mock.reported_startup("farm mock: compile cache cold\n")) == "cold"
    assert start_phases({"compile_s": 10.0}) is None  # launch to ready unknown: nothing is filled in


def test_the_h200_records_carry_their_start_phases_and_the_gpu_time_splits_them(tmp_path):
    results = read_results_file(REPO / "bench/h200/results.json")
    vllm = [r for r in results.records if r.engine == "vllm" and r.measured]
    # the later pass on the primary profile started each engine again; for 4 trials it was stored
    # before a pass kept its start's facts, so their runs (2 each) carry no start, not the first
    # one's; step4's pass 2 (2026-12-03) carries its own start, the trial's second
    first = [r for r in vllm if r.provenance.engine_start_s is not None]
    later = [r for r in vllm if r.provenance.engine_start_s is None]
    assert len(later) == 8 and {r.profile for r in later} == {"sharegpt_synthetic"}
    step4 = {r.provenance.engine_start_pass: r.provenance.engine_start_s for r in first if r.name == "step4_kv_cache_fp8"}
    assert set(step4) == {1, 2} and step4[1] != step4[2]
    assert all(r.provenance.start_phases is None and r.provenance.start_cache is None for r in later)
    assert {r.trial for r in first} == {r.trial for r in vllm}
    assert all(r.provenance.start_phases and r.provenance.start_cache == "cold" for r in first)
    for r in first:
        assert abs(sum(r.provenance.start_phases.values()) - r.provenance.engine_start_s) < 0.1
    cost = gpu_time(results)
    assert cost.starts["cold"] and cost.start_phases["compilation"] > 0
    starts = {(r.trial, r.provenance.engine_start_pass): r.provenance.start_phases
              for r in results.records if r.provenance and r.provenance.start_phases}
    assert abs(sum(cost.start_phases.values()) - sum(sum(p.values()) for p in starts.values())) < 0.5
    # every cold start once, step4's two included: vLLM's by its log, SGLang's 512-radix-off trial
    # (2026-12-03) by its empty node cache; SGLang's baseline predates that check and says nothing
    cold = {(r.trial, r.provenance.engine_start_pass) for r in results.records
            if r.provenance and r.provenance.engine_start_s is not None and r.provenance.start_cache == "cold"}
    assert {t for t, _ in cold} >= {r.trial for r in vllm} and any(r.engine == "sglang" and (r.trial, 1) in cold
                                                                    for r in results.records)
    assert len(cost.starts["cold"]) == len(cold) == len({k for k in starts if k in cold})


def test_a_start_from_a_pulled_pack_loads_what_the_cold_start_compiled():
    # grid `starts` on the H200 (2026-12-02): the same two configurations on an empty node cache,
    # the cache pulled from the packs the cold starts published; vLLM loads its graphs instead of compiling
    vllm = get_engine("vllm")
    for config in ("fp8", "fp8-prefix-throughput"):
        cold = vllm.reported_startup((LOGS / f"vllm-0.20.2-{config}-dummy-starts-cold.log").read_text())
        warm = vllm.reported_startup((LOGS / f"vllm-0.20.2-{config}-dummy-starts-warm-from-pack.log").read_text())
        assert start_cache(cold) == "cold" and start_cache(warm) == "warm"
        assert warm["compile_s"] < cold["compile_s"] / 5


def test_the_committed_starts_sweeps_record_each_group_cold_then_warm():
    cold = read_results_file(REPO / "bench/h200/starts/cold/results.json")
    warm = read_results_file(REPO / "bench/h200/starts/warm/results.json")
    by_name = {r.name: r.provenance for r in cold.records}
    assert set(by_name) == {r.name for r in warm.records} == {"fp8", "fp8_prefix_throughput"}
    for r in warm.records:
        assert by_name[r.name].start_cache == "cold" and r.provenance.start_cache == "warm"
        # what the README states per group: the warm start against its cold one, phases summing to it
        assert abs(sum(r.provenance.start_phases.values()) - r.provenance.engine_start_s) < 0.1
        assert r.provenance.start_phases["compilation"] < by_name[r.name].start_phases["compilation"]


def _start_of(name: str) -> tuple[dict, str, str]:
    """What farm reads of one committed H200 start: the engine's report, its command, and the
    torch.compile cache directory vLLM chose (a hash of its configuration)."""
    log = (LOGS / f"{name}.log").read_text()
    cache = re.search(r"torch_compile_cache/([0-9a-f]+)/", log)
    return get_engine("vllm").reported_startup(log), (LOGS / f"{name}.command.txt").read_text(), cache.group(1)


def test_a_pack_carried_to_a_fresh_machine_starts_it_warm():
    # 2026-12-03: step3's group compiled on machine 1 (scripts/h200/start-only.py, published to the
    # packs), carried in parts to machine 2, pulled there: 125 s against 273 s, torch.compile 9 s
    # against 76 s, and vLLM found its graphs under the same cache directory
    cold, cold_cmd, cold_dir = _start_of("vllm-0.20.2-fp8-prefix-throughput-dummy-start-only-cold-machine-1")
    warm, warm_cmd, warm_dir = _start_of("vllm-0.20.2-fp8-prefix-throughput-dummy-start-only-warm-carried-machine-2")
    assert (start_cache(cold), start_cache(warm)) == ("cold", "warm") and cold_dir == warm_dir
    assert warm["compile_s"] < 0.2 * cold["compile_s"] and warm["profile_run_s"] < 0.2 * cold["profile_run_s"]
    facts = {p.name: json.loads(p.read_text()) for p in (REPO / "bench/h200/starts/carried").glob("*.json")}
    cold_start, warm_start = facts["step3-cold-machine-1.json"], facts["step3-warm-carried-machine-2.json"]
    assert warm_start["compile_cache_pulled"]["bytes"] == cold_start["compile_cache_published"]["bytes"]
    assert warm_start["ready_s"] <= 0.6 * cold_start["ready_s"]  # the target for a warm start


def test_vllm_compiles_again_where_the_model_sits_at_another_path_so_farm_keys_packs_by_it():
    # step4's group: published by the sweep (model under /tmp/farm-h200/src/.models), pulled by a
    # start whose model sat under the checkout: same flags, another cache directory, a cold start
    trial, trial_cmd, trial_dir = _start_of("vllm-0.20.2-fp8-prefix-throughput-kvfp8-dummy-pass2-2026-12-03-start")
    moved, moved_cmd, moved_dir = _start_of(
        "vllm-0.20.2-fp8-prefix-throughput-kvfp8-dummy-start-only-pack-from-other-path-machine-2")

    def flags(cmd: str) -> list[str]:
        return [a for a in cmd.split()[5:] if not a.startswith("--port=")]

    assert cmd_model(trial_cmd) != cmd_model(moved_cmd) and flags(trial_cmd) == flags(moved_cmd)
    assert trial_dir != moved_dir and start_cache(moved) == "cold"
    # farm's pack key now follows the path for vLLM: such a pack is not pulled (70 MB for nothing)
    from actors.compile_cache import group_key
    from farm.study.trial import Trial

    def key(cmd: str) -> str:
        return group_key(get_engine("vllm"), Trial(id="x", engine="vllm", model_key="m", model=cmd_model(cmd),
                                                   flags={}, profiles=["p"], gpus=1), "NVIDIA H200")
    assert key(trial_cmd) != key(moved_cmd)


def cmd_model(cmd: str) -> str:
    return cmd.split()[4]  # python3 -m vllm.entrypoints.cli.main serve MODEL ...
