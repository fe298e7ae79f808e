"""Results are per GPU model: a sweep records the model its GPU trials ran on (the name `auto`
resolved to) in its study snapshot and on its run, a resume on another model is refused, and a
results file read with an `auto` study takes the model its runs recorded. Real MLflow (SQLite)."""

from __future__ import annotations

import pytest

from conftest import REPO
from farm.analysis.accelerator import resolved
from farm.errors import UserError
from farm.store import schema
from farm.study.grid import expand
from farm.study.load import load_study
from sweeptools import write_study


def test_the_accelerator_tag_keeps_its_stored_name():
    assert schema.ACCELERATOR_TAG == "farm.accelerator"  # stored sweeps outlive the farm that wrote them


@pytest.fixture
def auto_study(tmp_path):
    return load_study(write_study(tmp_path / "s.yaml", name="gpus", grid="g", accelerator_type="auto",
                                  blocks=[{"engine": "mock", "models": ["tiny"], "flags": {"gpus": 1}}]))


def test_a_resume_on_another_gpu_model_is_refused_and_on_the_same_goes_on(tmp_path, auto_study):
    from mlflow.tracking import MlflowClient

    from farm.run.driver import check_same_accelerator
    from farm.store import tracking

    trials = expand(auto_study, "g")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(uri).create_experiment("gpus", artifact_location=(tmp_path / "artifacts").as_uri())
    _, sweep_id = tracking.start_sweep(uri, "gpus", resolved(auto_study, "H200"), "g", trials, command="t", repeats=1)
    assert MlflowClient(uri).get_run(sweep_id).data.tags[schema.ACCELERATOR_TAG] == "H200"

    check_same_accelerator(uri, sweep_id, resolved(auto_study, "H200"), trials, from_cluster=True)  # same: on
    with pytest.raises(UserError) as err:
        check_same_accelerator(uri, sweep_id, resolved(auto_study, "H100"), trials, from_cluster=True)
    assert err.value.line() == (f"--resume: sweep {sweep_id} measured on H200; this cluster's GPUs are H100: results "
                                f"are per GPU model; start a new sweep (without --resume) on these GPUs, or resume it "
                                f"on H200 ones")
    with pytest.raises(UserError, match="this sweep asks for H100"):  # --accelerator H100, not the cluster's
        check_same_accelerator(uri, sweep_id, resolved(auto_study, "H100"), trials, from_cluster=False)


def test_a_sweep_of_cpu_trials_records_no_gpu_model(tmp_path):
    from mlflow.tracking import MlflowClient

    from farm.store import tracking

    study = load_study(write_study(tmp_path / "s.yaml", name="cpu", grid="g", accelerator_type="H200",
                                   blocks=[{"engine": "mock", "models": ["tiny"]}]))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(uri).create_experiment("cpu", artifact_location=(tmp_path / "artifacts").as_uri())
    _, sweep_id = tracking.start_sweep(uri, "cpu", study, "g", expand(study, "g"), command="t", repeats=1)
    assert schema.ACCELERATOR_TAG not in MlflowClient(uri).get_run(sweep_id).data.tags


def test_a_results_file_read_with_an_auto_study_takes_the_gpu_model_its_runs_recorded():
    from farm.cli.analyze import _recorded_accelerator
    from farm.store.results_store import ResultsFileStore

    study = load_study(REPO / "configs/h200-dummy.yaml")
    assert study.accelerator_type == "auto"
    h200 = ResultsFileStore(REPO / "bench/h200/results.json").records(study=study)
    named = _recorded_accelerator(study, h200)
    assert named.accelerator_type == "H200" and {e.accelerator_type for e in named.engines.values()} == {"H200"}
    # runs of two models (or none named): no GPU model to predict memory for
    mixed = h200.model_copy(update={"records": [
        r.model_copy(update={"provenance": r.provenance.model_copy(update={"gpu": "NVIDIA H100 80GB HBM3"})})
        if i == 0 and r.provenance is not None else r for i, r in enumerate(h200.records)]})
    assert _recorded_accelerator(study, mixed).accelerator_type == "auto"


def test_the_sweeps_description_names_the_gpu_model_of_its_gpu_hours():
    from farm.report.summary import summary_markdown
    from farm.analysis.results_file import read_results_file
    from farm.report.build import report_for

    report = report_for(read_results_file(REPO / "bench/h200/results.json"), load_study(REPO / "configs/h200-dummy.yaml"))
    assert "**GPU-hours**: 2.97 (NVIDIA H200)" in summary_markdown(report, gpu_hours=2.972, gpu_model="NVIDIA H200")
    assert "**GPU-hours**: 2.97\n" in summary_markdown(report, gpu_hours=2.972) + "\n"
