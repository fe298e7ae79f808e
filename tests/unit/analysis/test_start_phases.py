"""Every run record carries its engine start's phases, read from the engine's own log, and
whether the start was cold or warm; the report's GPU time splits the starts by phase."""

from __future__ import annotations


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
    # the later pass on the primary profile started each engine again; it was stored before a pass
    # kept its start's facts, so its runs (2 for each of 4 trials) carry no start, not the first one's
    first = [r for r in vllm if r.provenance.engine_start_s is not None]
    later = [r for r in vllm if r.provenance.engine_start_s is None]
    assert len(later) == 8 and {r.profile for r in later} == {"sharegpt_synthetic"}
    assert all(r.provenance.start_phases is None and r.provenance.start_cache is None for r in later)
    assert {r.trial for r in first} == {r.trial for r in vllm}
    assert all(r.provenance.start_phases and r.provenance.start_cache == "cold" for r in first)
    for r in first:
        assert abs(sum(r.provenance.start_phases.values()) - r.provenance.engine_start_s) < 0.1
    cost = gpu_time(results)
    assert cost.starts["cold"] and cost.start_phases["compilation"] > 0
    starts = {r.trial: r.provenance.start_phases for r in results.records if r.provenance and r.provenance.start_phases}
    assert abs(sum(cost.start_phases.values()) - sum(sum(p.values()) for p in starts.values())) < 0.5


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
