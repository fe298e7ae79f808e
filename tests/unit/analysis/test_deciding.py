"""Which throughput decides (a study's `deciding_metric`), and what each run carries of its machine and
GPUs, from a trial's result through the records into a results file and back, and into MLflow."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES
from farm.analysis.records import (DECIDING_METRICS, deciding_value, records_from_trials, results_to_data,
                                   write_results_file)
from farm.analysis.results_file import read_results_file
from farm.analysis.results import GpuSamples, MachineFingerprint, ProfileRun, Spread, Status, TrialResult, parse_report
from farm.study.trial import Trial

# a real run with per-request timings: its steady-state rate is known (tests/unit/analysis/test_steady.py)
METRICS = parse_report(FIXTURES / "guidellm-0.8.1-mock-report-requests.json", 96)[0]
MACHINE = MachineFingerprint(host="a1b2c3d4e5f6", kernel="6.8.0", cpu_model="AMD EPYC 9654", cpu_count=16,
                             gpu_name="NVIDIA H100 80GB HBM3", gpu_count=1, gpu_driver="580.159.04",
                             cuda_driver="13.0", gpu_uuids="0f0f0f0f0f0f", gpu_max_sm_clock_mhz=1980.0)
GPU = GpuSamples(measured=True, gpus=["0"], samples=240, sm_clock_mhz=Spread(min=1410.0, mean=1755.0, max=1980.0),
                 temperature_c=Spread(min=41.0, mean=63.5, max=71.0), power_w=Spread(min=120.0, mean=612.0, max=699.0))


def _result(study, *, machine_of_second: str | None = None, steady: bool = True) -> TrialResult:
    p = study.primary_profile
    trial = Trial(id="vllm-0000abcd", engine="vllm", model_key="bf16", model="Qwen/Qwen3.5-35B-A3B", profiles=[p],
                  gpus=1)
    metrics = METRICS if steady else METRICS.model_copy(update={"steady_tps": None, "steady_output_tps": None,
                                                               "steady_window_s": None})
    runs = [ProfileRun(profile=p, repeat=0, status=Status.ok, metrics=metrics, started_at=100.0, finished_at=160.0,
                       gpu=GPU, machine=MACHINE.key),
            ProfileRun(profile=p, repeat=1, status=Status.ok, metrics=metrics, started_at=200.0, finished_at=260.0,
                       gpu=GpuSamples(measured=False, reason="NVML absent: NVMLError_LibraryNotFound"),
                       machine=machine_of_second or MACHINE.key, pass_index=2 if machine_of_second else 1)]
    return TrialResult(sweep_id="s", trial=trial, status=Status.ok, started_at=50.0, finished_at=300.0, runs=runs,
                       machine=MACHINE)


def test_the_study_says_which_throughput_decides(study):
    assert DECIDING_METRICS == ("total_tps", "steady_tps") and study.deciding_metric == "total_tps"
    results = records_from_trials([_result(study)], study)
    assert results.deciding_metric == "total_tps"
    rec = results.records[0]
    assert deciding_value(rec, results.deciding_metric) == rec.metrics["total_tps"] == METRICS.total_tps
    steady = records_from_trials([_result(study)], study.model_copy(update={"deciding_metric": "steady_tps"}))
    assert steady.deciding_metric == "steady_tps"
    assert deciding_value(steady.records[0], steady.deciding_metric) == METRICS.steady_tps != METRICS.total_tps


def test_a_run_without_a_steady_window_has_no_deciding_value_under_steady_tps(study):
    # never the totals-based rate in its place: a trial is ranked on one number or not at all
    rec = records_from_trials([_result(study, steady=False)], study).records[0]
    assert deciding_value(rec, "steady_tps") is None and deciding_value(rec, "total_tps") == METRICS.total_tps
    failed = rec.model_copy(update={"status": Status.low_success_rate})
    assert deciding_value(failed, "total_tps") is None


def test_a_study_with_another_deciding_metric_is_refused_with_its_key():
    from pydantic import ValidationError

    from farm.study.spec import Study

    with pytest.raises(ValidationError, match="deciding_metric"):
        Study.model_validate({"name": "x", "models": {}, "engines": {}, "profiles": {}, "grids": {},
                              "primary_profile": "p", "deciding_metric": "guidellm_total_tps_mean"})


def test_provenance_carries_the_machine_and_the_gpus_over_each_run(study):
    results = records_from_trials([_result(study, machine_of_second="ffffeeeedddd")], study)
    first, second = results.records
    assert first.provenance.machine_key == MACHINE.key and first.provenance.machine == MACHINE
    assert first.provenance.gpu_samples == GPU
    # a later pass on another machine: named by its key, not given the first pass's fingerprint
    assert second.provenance.machine_key == "ffffeeeedddd" and second.provenance.machine is None
    assert second.provenance.gpu_samples.measured is False
    assert second.provenance.gpu_samples.reason.startswith("NVML absent")


def test_a_results_file_keeps_them(study, tmp_path):
    results = records_from_trials([_result(study)], study.model_copy(update={"deciding_metric": "steady_tps"}))
    path = write_results_file(results, tmp_path / "results.json")
    data = json.loads(path.read_text())
    assert data["deciding_metric"] == "steady_tps"
    run = data["runs"][0]
    assert run["metrics"]["steady_tps"] == pytest.approx(METRICS.steady_tps)
    assert run["metrics"]["client_lost_requests"] == 1.0
    assert run["provenance"]["gpu_samples"]["sm_clock_mhz"] == {"min": 1410.0, "mean": 1755.0, "max": 1980.0}
    assert run["provenance"]["machine"]["gpu_driver"] == "580.159.04"
    back = read_results_file(path)
    assert back.deciding_metric == "steady_tps" and back.records == results.records
    # a file that says nothing decides by total_tps (every file written before the key)
    plain = records_from_trials([_result(study)], study)
    assert "deciding_metric" not in results_to_data(plain)


def test_mlflow_gets_the_machine_as_tags_and_the_gpu_samples_as_metrics(study, tmp_path, monkeypatch):
    from farm.store import schema as S
    from farm.store import tracking

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    c = tracking.client(uri)
    exp = tracking.experiment_id(uri, "machines")
    sweep = c.create_run(exp, run_name="sweep").info.run_id
    result = _result(study).model_copy(update={"sweep_id": sweep})
    run = c.get_run(tracking.log_trial(uri, exp, sweep, result, None))
    tags, metrics, p = run.data.tags, run.data.metrics, study.primary_profile
    assert (tags["farm.machine"], tags["farm.machine.gpu_name"], tags["farm.machine.gpu_driver"],
            tags["farm.machine.cuda_driver"], tags["farm.machine.kernel"], tags["farm.machine.cpu_model"],
            tags["farm.machine.host"]) == (MACHINE.key, "NVIDIA H100 80GB HBM3", "580.159.04", "13.0", "6.8.0",
                                           "AMD EPYC 9654", "a1b2c3d4e5f6")
    assert tags[S.GPU_NOT_MEASURED_TAG] == "not measured: NVML absent: NVMLError_LibraryNotFound"
    # only the measured run's samples: a run not measured is no zero in the mean
    assert metrics[f"{p}/gpu_sm_clock_mhz_min"] == 1410.0 and metrics[f"{p}/gpu_power_w_mean"] == 612.0
    assert f"{p}/runs/gpu_sm_clock_mhz_min" not in metrics
    assert metrics[f"{p}/steady_tps"] == pytest.approx(METRICS.steady_tps)
    # energy: the measured run's alone (its mean W x its window: it kept no integral), the other no zero
    joules = 612.0 * METRICS.duration_s
    assert metrics[f"{p}/energy_j"] == pytest.approx(joules) and metrics[f"{p}/power_mean_w"] == 612.0
    assert metrics[f"{p}/power_peak_w"] == 699.0
    assert metrics[f"{p}/output_tokens_per_j"] == pytest.approx(METRICS.total_output_tokens / joules)
    assert metrics[f"{p}/total_tokens_per_j"] == pytest.approx(
        (METRICS.total_input_tokens + METRICS.total_output_tokens) / joules)
    assert f"{p}/runs/energy_j" not in metrics
    assert metrics[f"{p}/client_lost_requests"] == 1.0
