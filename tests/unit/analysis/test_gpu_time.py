"""Where a sweep's GPU time went (farm/analysis/gpu_time.py): each trial's wall time split into
starting, warm-up, measuring, failing and farm's own, times the GPUs it held; the report's
"GPU time" section; nothing shown where the records do not say how long their trials took."""

from __future__ import annotations

import json

import pytest

from conftest import SEED_FILE

from farm.analysis.gpu_time import gpu_time
from farm.analysis.records import records_from_trials, results_to_data
from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult, WarmupRun
from farm.analysis.results_file import read_results_file
from farm.report.build import build_report
from farm.analysis.select import settings_for
from farm.report.text import render
from farm.study.trial import Trial


def _metrics() -> RunMetrics:
    return RunMetrics(successful_requests=10, errored_requests=0, incomplete_requests=0, total_requests=10,
                      success_rate=1.0, duration_s=40.0, total_input_tokens=10, total_output_tokens=10,
                      request_throughput=10, output_tps=10, total_tps=20)


def _trial(tid: str, gpus: int, profiles: list[str]) -> Trial:
    return Trial(id=tid, engine="vllm", model_key="bf16", model="Qwen/Qwen3.5-35B-A3B", profiles=profiles, gpus=gpus)


@pytest.fixture
def sweep(study):
    p = study.primary_profile
    t0 = 1_000_000.0
    # 600 s in the actor: 250 s start, 30 s warm-up, two runs of 100 s, 20 s of farm's own
    ok = TrialResult(sweep_id="s", trial=_trial("vllm-00000001", 2, [p]), status=Status.ok, started_at=t0,
                     finished_at=t0 + 600, engine_reported={"ready_s": 250.0},
                     warmup_runs=[WarmupRun(profile=p, requests=256, seconds=30.0, ok=True)],
                     runs=[ProfileRun(profile=p, repeat=r, status=Status.ok, metrics=_metrics(),
                                      started_at=t0 + 280 + 100 * r, finished_at=t0 + 380 + 100 * r) for r in (0, 1)])
    # never started: its 1800 s went to failing, on one GPU
    failed = TrialResult(sweep_id="s", trial=_trial("vllm-00000002", 1, [p]), status=Status.engine_failed_to_start,
                         reason="not ready", started_at=t0, finished_at=t0 + 1800)
    return records_from_trials([ok, failed], study)


def test_each_trial_s_wall_time_is_split_into_its_phases(sweep):
    cost = gpu_time(sweep)
    ok, failed = cost.trials
    assert ok.seconds.model_dump() == {"starting": 250.0, "warming_up": 30.0, "measuring": 200.0, "failing": 0.0,
                                       "other": 120.0}
    assert failed.seconds.failing == 1800.0 and failed.seconds.total == 1800.0
    # GPU-seconds count each GPU the trial held; trial-seconds count the trial once
    assert cost.gpu_seconds.starting == 500.0 and cost.gpu_seconds.failing == 1800.0
    assert cost.trial_seconds.total == 600.0 + 1800.0
    assert cost.gpu_seconds.total == 2 * 600.0 + 1800.0


def test_the_report_shows_gpu_hours_by_phase(sweep, study):
    report = build_report(sweep, settings_for(sweep, study))
    text = render(report, "markdown")
    assert "## GPU time" in text
    assert "0.833 GPU-hours over 2 trial(s)" in text  # (1200 + 1800) s
    assert "| failed runs and trials | 0.500 | 60% |" in text
    assert json.loads(render(report, "json"))["gpu_time"]["gpu_seconds"]["measuring"] == 400.0


def test_the_phases_survive_a_results_file(sweep, tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results_to_data(sweep)))
    assert gpu_time(read_results_file(path)) == gpu_time(sweep)


def test_records_without_trial_times_give_no_figures():
    # the seed's file (and farm's from before these fields, as bench/h200/results.json) says
    # nothing of its GPU time
    assert gpu_time(read_results_file(SEED_FILE)) is None


def test_a_later_pass_s_engine_start_is_starting_time_not_farm_s_own(study):
    """A trial repeated in a second pass starts its engine again and holds its GPU for that start
    (on the H200 step4's pass 2 started cold in 321 s, and the report counted it as farm's own)."""
    from farm.analysis.plan import merge_pass

    p = study.primary_profile

    def one_pass(t0: float, ready: float, hit: bool, repeats: list[int]) -> TrialResult:
        return TrialResult(sweep_id="s", trial=_trial("vllm-00000003", 1, [p]), status=Status.ok, started_at=t0,
                           finished_at=t0 + ready + 100 * len(repeats) + 10,
                           engine_reported={"ready_s": ready, "compile_cache_hit": hit,
                                            "compile_s": 50.0 if not hit else 5.0},
                           runs=[ProfileRun(profile=p, repeat=r, status=Status.ok, metrics=_metrics(),
                                            started_at=t0 + ready + 100 * i, finished_at=t0 + ready + 100 * (i + 1))
                                 for i, r in enumerate(repeats)])

    merged = merge_pass(one_pass(0.0, 300.0, False, [0]), one_pass(10_000.0, 120.0, True, [0, 1]), pass_index=2)
    cost = gpu_time(records_from_trials([merged], study))
    (trial,) = cost.trials
    # held 410 s in pass 1 and 330 s in pass 2: two starts, three runs, 10 s of farm's own each time
    assert trial.seconds.model_dump() == {"starting": 420.0, "warming_up": 0.0, "measuring": 300.0, "failing": 0.0,
                                          "other": 20.0}
    assert cost.starts == {"cold": [300.0], "warm": [120.0]}
    assert cost.start_phases["compilation"] == 55.0


def test_a_trial_started_only_to_read_its_log_is_a_start_not_a_failure():
    # The H200's sglang_running_256 and _512 (2026-12-04): started warm (125 s, 120 s), found to be the
    # default's server by their logs, stopped: their GPU time is starting and farm's stop, not failing.
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "bench" / "h200" / "results.json"
    times = gpu_time(read_results_file(path))
    by = {t.label: t for t in times.trials}
    for name, start in (("sglang_running_256", 125.35), ("sglang_running_512", 120.14)):
        t = by[name]
        assert t.seconds.failing == 0 and t.seconds.measuring == 0
        assert t.seconds.starting == pytest.approx(start) and t.seconds.other > 0
