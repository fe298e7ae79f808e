"""A run's energy (farm/analysis/energy.py): joules over its window, watts, tokens per joule, or why not measured.

The GPU fixture is real: the committed H100 search's second sitting (bench/h100/from-seed/results.json,
vLLM 0.20.2 on an H100 80GB HBM3, dummy weights), whose runs kept each GPU's min/mean/max power over
their window (83-91 samples over ~21 s): their joules are mean W x window, and they say so."""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from farm.analysis.energy import integrate, run_energy
from farm.analysis.records import write_results_file
from farm.analysis.results import GpuSamples, Spread
from farm.analysis.results_file import read_results_file

H100 = REPO / "bench" / "h100" / "from-seed" / "results.json"


def test_the_trapezoid_is_exact_on_a_linear_curve_and_level_past_the_samples():
    ramp = [(0.0, 100.0), (1.0, 300.0), (2.0, 500.0)]
    assert integrate(ramp, (0.0, 2.0)) == pytest.approx(600.0)
    assert integrate(ramp, (0.5, 1.5)) == pytest.approx(300.0)  # interpolated at both edges
    assert integrate(ramp, (-1.0, 0.0)) == pytest.approx(100.0)  # before the first sample: its value
    assert integrate(ramp, (2.0, 4.0)) == pytest.approx(1000.0)
    assert integrate([], (0.0, 1.0)) is None


def test_the_committed_h100_runs_have_joules_from_their_mean_power():
    results = read_results_file(H100)
    measured = [r for r in results.records if r.energy.measured]
    # the second sitting's two trials, the third's control of the incumbent, and the fourth's control
    # and GPU memory 0.95, 5 runs each (the first sitting's runs predate the power samples)
    assert {r.trial for r in measured} == {"vllm-d9b0e5bb", "vllm-c1c3eb4e", "vllm-1ffa2a61@resume1.1",
                                           "vllm-1ffa2a61@resume1.2", "vllm-d19a1e96"}
    assert len(measured) == 25
    first = next(r for r in measured if r.trial == "vllm-d9b0e5bb" and r.repeat == 0)
    e = first.energy
    samples = first.provenance.gpu_samples
    assert e.method == "mean_x_window" and e.window_s == first.metrics["duration_s"]
    assert e.joules == pytest.approx(samples.power_w.mean * first.metrics["duration_s"])
    assert e.joules == pytest.approx(10973, abs=1) and e.mean_w == pytest.approx(525.75, abs=0.01)
    assert e.peak_w == samples.power_w.max == 635.541  # one GPU: its own peak is the trial's
    assert e.output_tokens_per_j == pytest.approx(111335 / e.joules)
    assert e.total_tokens_per_j == pytest.approx((111335 + 121295) / e.joules)
    # ~10 output tokens a joule on every configuration; the same configuration (the incumbent's
    # controls) 4 % apart on two machines, within 1.2 % on one: energy, like throughput, is per machine
    bounds = {"vllm-1ffa2a61@resume1.1": (10.25, 10.35, 21.45, 21.6), "vllm-1ffa2a61@resume1.2": (9.75, 9.9, 20.4, 20.7),
              "vllm-d19a1e96": (9.9, 10.0, 20.7, 20.85)}
    for r in measured:
        lo, hi, tlo, thi = bounds.get(r.trial, (10.0, 10.3, 20.9, 21.4))
        assert lo < r.energy.output_tokens_per_j < hi and tlo < r.energy.total_tokens_per_j < thi
        # the third and fourth sittings' runs: the power curve integrated (farm sampled it by then)
        assert r.energy.method == ("trapezoid" if r.trial in bounds else "mean_x_window")


def test_runs_without_samples_say_why_and_carry_no_numbers():
    results = read_results_file(H100)
    reasons = {r.energy.reason for r in results.records if not r.energy.measured}
    assert "not recorded: the run is from before farm sampled GPUs" in reasons
    assert "the run did not end ok (not_measurable)" in reasons
    for r in results.records:
        if not r.energy.measured:
            assert r.energy.joules is r.energy.mean_w is r.energy.output_tokens_per_j is None
    no_power = GpuSamples(measured=True, gpus=["0"], samples=80, sm_clock_mhz=Spread(min=1, mean=1, max=1))
    assert run_energy(no_power, duration_s=20, input_tokens=1, output_tokens=1).reason.startswith("NVML answered no power")
    # several GPUs with only each one's peak kept: the trial's peak is not known, its mean is theirs together
    two = GpuSamples(measured=True, gpus=["0", "1"], samples=80, power_w=Spread(min=100, mean=400, max=600))
    e = run_energy(two, duration_s=10.0, input_tokens=0.0, output_tokens=4000.0)
    assert (e.mean_w, e.joules, e.peak_w, e.output_tokens_per_j) == (800.0, 8000.0, None, 0.5)


def test_a_results_file_gives_each_runs_energy_and_reads_back_the_same(tmp_path):
    results = read_results_file(H100)
    path = write_results_file(results, tmp_path / "results.json")
    runs = {(r["trial"], r["repeat"], r["profile"]): r for r in json.loads(path.read_text())["runs"]}
    run = runs[("vllm-d9b0e5bb", 0, "sharegpt_synthetic.rung1")]
    assert run["energy"]["measured"] is True and run["energy"]["method"] == "mean_x_window"
    assert run["energy"]["joules"] == pytest.approx(10973, abs=1)
    old = next(r for r in runs.values() if r.get("energy", {}).get("reason", "").startswith("not recorded"))
    assert "joules" not in old["energy"]
    assert read_results_file(path).records == results.records
