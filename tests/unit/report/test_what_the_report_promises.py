"""The report says only what holds for the sweep it reports: a mock sweep of single runs with no
baseline gets no 'Weights: real', no interval over repeats it did not run, no blue baseline bar;
a serve command keeps each flag beside its value."""

from __future__ import annotations

import pytest

from farm.analysis.records import records_from_trials
from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.report import render, report_for
from farm.report.plots import throughput_title, tpot_title
from farm.report.text import pretty_command
from farm.study.grid import expand
from farm.study.load import load_study


def _metrics(tps: float) -> RunMetrics:
    return RunMetrics(successful_requests=48, total_requests=48, success_rate=1.0, duration_s=2.0,
                      total_input_tokens=tps, total_output_tokens=tps, request_throughput=24, output_tps=tps / 2,
                      total_tps=tps, ttft_mean_ms=50.0, ttft_p95_ms=80.0, tpot_mean_ms=10.0)


@pytest.fixture(scope="module")
def mock_report():
    study = load_study()
    trials = expand(study, "smoke")
    results = [TrialResult(sweep_id="s", trial=t, status=Status.ok, attempt=1, serve_command=f"guidellm mock-server {i}",
                           runs=[ProfileRun(profile=p, repeat=0, status=Status.ok, metrics=_metrics(1000 - 100 * i),
                                            started_at=1_700_000_000.0) for p in t.profiles],
                           engine_version="0.8.1", node="node-a", gpus=[], started_at=1_700_000_000.0,
                           finished_at=1_700_000_001.0)
               for i, t in enumerate(trials)]
    return report_for(records_from_trials(results, study, grid="smoke", sweep_id="s"), study, grid="smoke")


def test_a_mock_sweep_claims_no_real_weights(mock_report):
    assert "Weights:" not in render(mock_report, "markdown")


def test_plot_titles_promise_no_interval_or_baseline_a_sweep_does_not_have(mock_report):
    assert mock_report.selection.baseline is None
    title = throughput_title(mock_report)
    assert "interval over the repeats" not in title and "blue: baseline" not in title
    assert "one run each" in title and "green: recommended" in title
    assert "with intervals" not in tpot_title(mock_report)


def test_the_report_names_its_trials_by_what_sets_them_apart(mock_report):
    text = render(mock_report, "text")
    assert "ttft-ms=50 itl-ms=10" in text


def test_a_serve_command_keeps_each_flag_beside_its_value():
    cmd = "python3 -m sglang.launch_server --model-path Qwen/Qwen3 --tp 2 --enable-mixed-chunk --port 30000"
    assert pretty_command(cmd).splitlines() == [
        "python3 -m sglang.launch_server \\", "    --model-path Qwen/Qwen3 \\", "    --tp 2 \\",
        "    --enable-mixed-chunk \\", "    --port 30000"]
    assert pretty_command("vllm serve m --max-num-seqs=256 --enforce-eager").splitlines()[1:] == [
        "    --max-num-seqs=256 \\", "    --enforce-eager"]
