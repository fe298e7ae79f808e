"""Dollars and joules per million tokens (farm/analysis/cost.py, issue 50), on the committed GPU runs:
the H200 study's (bench/h200/results.json: no power recorded) and the H100 search's second sitting
(bench/h100/from-seed/results.json: power over each run's window)."""

from __future__ import annotations

import pytest

from conftest import REPO
from farm.analysis.results_file import read_results_file
from farm.errors import UserError
from farm.inputs import price
from farm.report import render, report_for
from farm.study.load import load_study

H100_PROFILE = "sharegpt_synthetic.rung1"  # the profile the search's runs measured (a rung of sharegpt_synthetic)


@pytest.fixture(scope="module")
def h200():
    study = load_study(REPO / "configs/h200-dummy.yaml").model_copy(update={"prices": {"H200": 3.5}})
    return report_for(read_results_file(REPO / "bench/h200/results.json"), study)


@pytest.fixture(scope="module")
def h100():
    r = read_results_file(REPO / "bench/h100/from-seed/results.json")
    r = r.model_copy(update={"records": [x for x in r.records if x.profile == H100_PROFILE],
                             "primary_profile": H100_PROFILE, "profiles": {H100_PROFILE: r.profiles[H100_PROFILE]}})
    study = load_study(REPO / "configs/qwen3.5-35b-a3b-h200.yaml").model_copy(update={"prices": {"h100": 2.5}})
    return report_for(r, study, prefer_results_profile=True)


def test_a_million_tokens_cost_the_price_over_the_throughput_and_the_interval_carries_over(h200):
    sel, costs = h200.selection, h200.costs
    row = next(t for t in sel.trials if t.id == sel.recommended.trial and t.profile == sel.primary_profile)
    pc = next(p for p in costs.trial(row.id).profiles if p.profile == sel.primary_profile)
    tps = row.stats["total_tps"]
    assert pc.usd_per_m_total.value == pytest.approx(3.5 / 3600 / tps.mean * 1e6)
    # a cost is a throughput's reciprocal: its low end is at the throughput's high end
    assert pc.usd_per_m_total.low == pytest.approx(3.5 / 3600 / tps.ci_high * 1e6)
    assert pc.usd_per_m_total.high == pytest.approx(3.5 / 3600 / tps.ci_low * 1e6)
    assert pc.usd_per_m_total.runs == tps.n == 3
    out = row.stats["output_tps"]
    assert pc.usd_per_m_output.value == pytest.approx(3.5 / 3600 / out.mean * 1e6)
    assert pc.usd_per_m_output.value > pc.usd_per_m_total.value
    # the runs recorded no power: energy not measured, and why, never a zero
    assert pc.j_per_m_total is None and pc.energy_runs == 0
    assert pc.energy_not_measured == "not recorded: the run is from before farm sampled GPUs"


def test_the_sweeps_own_gpu_hours_are_priced(h200):
    (sweep,) = h200.costs.sweep
    assert sweep.accelerator == "H200" and sweep.gpu_hours == pytest.approx(h200.gpu_time.gpu_seconds.total / 3600)
    assert sweep.usd == pytest.approx(sweep.gpu_hours * 3.5) and round(sweep.gpu_hours, 2) == 2.97


def test_the_report_says_what_a_million_tokens_cost_and_how_it_was_priced(h200):
    text = render(h200, "markdown")
    conclusion = text.split("## Conclusion", 1)[1].split("\n## ", 1)[0]
    assert "Dollars per million tokens (prompt + output) on `sharegpt_synthetic`, at H200 $3.5 per GPU-hour: " \
           "recommended $0.08444 [$0.07489, $0.09677]" in conclusion
    assert "baseline $0.09696 [$0.07965, $0.1239]" in conclusion
    assert ("Energy per million tokens on `sharegpt_synthetic`: not measured for recommended or baseline (not "
            "recorded: the run is from before farm sampled GPUs).") in conclusion
    section = text.split("## Cost and energy per million tokens", 1)[1].split("\n## ", 1)[0]
    assert "2.972 GPU-hours of H200: $10.4" in section


def test_without_a_price_the_report_says_costs_are_not_computed_and_how_to_give_one():
    study = load_study(REPO / "configs/h200-dummy.yaml")
    assert study.prices is None
    report = report_for(read_results_file(REPO / "bench/h200/results.json"), study)
    assert all(p.usd_per_m_total is None for t in report.costs.trials for p in t.profiles)
    assert report.costs.sweep[0].usd is None
    text = render(report, "text")
    assert ("Costs are not computed: no price given; give a price per GPU-hour: the study key `prices: {H100: 2.5}` "
            "or `--price H100=2.5` on farm sweep, farm report or farm analyze.") in text
    assert "$" not in text.split("Cost and energy per million tokens", 1)[1]


def test_a_price_for_another_gpu_prices_nothing_and_says_so():
    study = load_study(REPO / "configs/h200-dummy.yaml").model_copy(update={"prices": {"H100": 2.5}})
    report = report_for(read_results_file(REPO / "bench/h200/results.json"), study)
    rec = report.costs.trial(report.selection.recommended.trial)
    assert rec.not_priced == "no price for H200 (prices given: H100)"
    assert "not priced: " in render(report, "text")


def test_the_h100s_energy_per_million_tokens_reaches_the_report(h100):
    costs = h100.costs
    measured = {t.trial: t for t in costs.trials if t.profiles[0].energy_runs}
    assert set(measured) == {"vllm-d9b0e5bb", "vllm-c1c3eb4e", "vllm-1ffa2a61@resume1.1",  # @resume: controls
                             "vllm-1ffa2a61@resume1.2", "vllm-d19a1e96"}
    for tc in (measured["vllm-d9b0e5bb"], measured["vllm-c1c3eb4e"]):
        pc = tc.profiles[0]
        assert tc.accelerator == "H100" and tc.usd_per_gpu_hour == 2.5  # the price's key matched whatever its case
        assert pc.energy_runs == 5 and pc.j_per_m_total.low < pc.j_per_m_total.value < pc.j_per_m_total.high
        assert 1e6 / pc.j_per_m_total.value == pytest.approx(21.2, abs=0.1)
        assert 1e6 / pc.j_per_m_output.value == pytest.approx(10.15, abs=0.1)
    text = render(h100, "markdown")
    assert "Energy per million tokens (prompt + output) on `sharegpt_synthetic.rung1`, the GPUs' own: recommended " \
           "13.1" in text
    assert "0.896 GPU-hours of H100: $2.24" in text  # four sittings: 0.556 after the second, 0.754 the third


@pytest.mark.parametrize("given, reason", [
    ("H100", "expected ACCELERATOR=DOLLARS_PER_GPU_HOUR (e.g. H100=2.5), got 'H100'"),
    ("=2.5", "expected ACCELERATOR=DOLLARS_PER_GPU_HOUR (e.g. H100=2.5), got '=2.5'"),
    ("H100=abc", "expected dollars per GPU-hour above 0 and at most 10,000, got 'abc'"),
    ("H100=0", "expected dollars per GPU-hour above 0 and at most 10,000, got '0'"),
    ("H100=nan", "expected dollars per GPU-hour above 0 and at most 10,000, got 'nan'"),
    ("H 100=2", "expected an accelerator type as Ray names it (H100, H200, A100), got 'H 100'"),
])
def test_a_bad_price_is_one_line_naming_the_option(given, reason):
    with pytest.raises(UserError) as err:
        price(given, option="--price")
    assert err.value.line() == f"--price: {reason}"
    assert price(" H200=3.5 ", option="--price") == ("H200", 3.5)


def test_a_capacity_profile_is_also_priced_at_each_trials_slo_capacity():
    """The committed capacity curves are the vLLM CPU search's (bench/vllm-cpu/from-command: a ladder
    of concurrencies under P95 TTFT 60 s); read as if one H100 had served them (their provenance's
    GPU set so: a CPU run has no GPU-hour to price), each trial's cost at its SLO capacity is the
    price over the throughput of its run at that load."""
    r = read_results_file(REPO / "bench/vllm-cpu/from-command/results.json")
    gpu = r.model_copy(update={"records": [
        x.model_copy(update={"provenance": x.provenance.model_copy(update={"gpu": "NVIDIA H100 80GB HBM3", "gpus": 1})})
        if x.provenance is not None else x for x in r.records]})
    study = load_study(REPO / "configs/tiny-vllm-cpu.yaml").model_copy(update={"prices": {"H100": 3.6}})
    rep = report_for(gpu, study)
    (cap,) = rep.selection.capacity
    priced = 0
    for row in cap.rows:
        if row.capacity is None:
            continue
        pc = next(p for p in rep.costs.trial(row.trial).profiles if p.profile == cap.profile)
        point = next(p for p in row.curve if p.load == row.capacity)
        assert pc.capacity_load == row.capacity
        # $3.6 a GPU-hour is $0.001 a second: a million tokens at `tps` cost 1000 / tps dollars
        assert pc.usd_per_m_total_at_capacity == pytest.approx(1000 / point.total_tps)
        assert pc.usd_per_m_output_at_capacity == pytest.approx(1000 / point.output_tps)
        priced += 1
    assert priced >= 1
