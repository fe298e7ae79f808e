"""Placement and submission logic without a cluster: the mock engine's declared GPUs, the study's
accelerator type, the job's entrypoint and what travels with it. The capacity check's refusals
run against a real simulated cluster (tests/e2e/test_cluster_placement.py)."""

from __future__ import annotations

import pytest

from farm.engines import get_engine
from farm.study.spec import EngineSpec
from farm.study.trial import Trial


@pytest.mark.parametrize("value, gpus", [(None, 0), (0, 0), (1, 1), (4, 4)])
def test_mock_gpus_flag_declares_gpus_and_never_reaches_the_server(value, gpus):
    mock = get_engine("mock")
    flags = {"ttft-ms": 5} if value is None else {"gpus": value, "ttft-ms": 5}
    assert mock.gpus(flags) == gpus
    trial = Trial(id="mock-1", engine="mock", model_key="m", model="farm-tiny", flags=flags, profiles=["p"], gpus=gpus)
    argv = mock.command(EngineSpec(), trial, port=8000)
    assert "--ttft-ms=5" in argv and not any(a.startswith("--gpus") for a in argv)
    assert "--gpus" not in mock.serve_command(EngineSpec(), trial)


@pytest.mark.parametrize("bad", [-1, "2", True, 1.5])
def test_mock_gpus_flag_must_be_a_count(bad):
    with pytest.raises(ValueError, match="whole number"):
        get_engine("mock").gpus({"gpus": bad})


def test_study_accelerator_type_is_every_engines_default(tmp_path):
    from farm.study.load import load_study

    study = load_study()
    assert study.accelerator_type == "H200"
    assert {e.accelerator_type for e in study.engines.values()} == {"H200"}


def test_jobs_address_and_entrypoint():
    from farm.run.jobs import JOB_STUDY, SweepArgs, is_jobs_address

    assert is_jobs_address("http://head:8265") and is_jobs_address("https://head")
    assert not any(is_jobs_address(a) for a in (None, "auto", "head:6379", "ray://head:10001"))
    args = SweepArgs(grid="full", tracking_uri="http://head:5000", repeats=3, workdir="/data/runs")
    assert args.entrypoint() == (f"python -m farm.cli sweep --config {JOB_STUDY} --grid full --address auto "
                                 "--tracking-uri http://head:5000 --repeats 3 --workdir /data/runs")


def test_the_jobs_entrypoint_carries_auto_repeats_and_the_run_budget_that_farm_sweep_accepts():
    import shlex

    from farm.cli.main import sweep
    from farm.run.jobs import SweepArgs

    argv = shlex.split(SweepArgs(grid="full", tracking_uri="http://head:5000", repeats="auto",
                                 run_budget=120).entrypoint())
    assert argv[:4] == ["python", "-m", "farm.cli", "sweep"]
    params = sweep.make_context("sweep", argv[4:]).params  # the head parses it with the same options
    assert params["repeats"] == "auto" and params["run_budget"] == 120 and params["address"] == "auto"


def test_the_jobs_entrypoint_carries_the_halving_strategy_and_its_budget():
    import shlex

    from farm.cli.main import sweep
    from farm.run.jobs import SweepArgs

    argv = shlex.split(SweepArgs(grid="full", tracking_uri="http://head:5000", strategy="halving", budget=1.5).entrypoint())
    params = sweep.make_context("sweep", argv[4:]).params
    assert params["strategy"] == "halving" and params["budget"] == 1.5


def test_the_staged_project_carries_code_and_study_but_no_environments(tmp_path):
    import yaml

    from farm.run.jobs import JOB_STUDY, stage

    root = stage({"name": "s", "grids": {}}, tmp_path)
    assert (root / "farm" / "cli" / "main.py").is_file() and (root / "actors" / "bench.py").is_file()
    assert yaml.safe_load((root / JOB_STUDY).read_text()) == {"name": "s", "grids": {}}
    names = {p.name for p in root.rglob("*")}
    assert not names & {".venv", ".engines", ".models", "mlflow.db", "farm-runs", ".git", "__pycache__"}
    # measured data stays here: the H200's store alone is over Ray's 10 MiB upload warning
    assert not (root / "bench").exists() and not (root / "docs").exists()
    assert (root / "configs" / "smoke.yaml").is_file() and (root / "actors" / "bench.py").is_file()


def test_prometheus_text_parsing():
    from farm.run.metrics import parse_prometheus

    text = ('# TYPE ray_farm_trials gauge\n'
            'ray_farm_trials{Component="core_worker",state="done",sweep="ab"} 8.0\n'
            'ray_farm_trials_other{state="x"} 1\n')
    assert parse_prometheus(text, "ray_farm_trials") == [({"Component": "core_worker", "state": "done", "sweep": "ab"}, 8.0)]


def test_a_study_from_outside_the_project_travels_merged(tmp_path):
    from farm.run.jobs import JOB_STUDY, PROJECT, _shipped

    assert _shipped(PROJECT / "configs" / "smoke.yaml")
    assert not _shipped(tmp_path / "study.yaml")
    assert not _shipped(PROJECT / ".venv" / "x.yaml") and not _shipped(PROJECT / "farm-runs" / "s.yaml")
    assert JOB_STUDY.startswith(".farm-job/")
