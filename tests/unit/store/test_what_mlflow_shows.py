"""What a user sees of a sweep in MLflow, on a real SQLite MLflow written by farm's own writer:
the experiment opens on its runs (its kind is classic ML, not GenAI), and each trial's run is
named by what sets it apart, not by its hash; a sweep stored before trials had names still reads."""

from __future__ import annotations


import pytest

from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.store import schema
from farm.store.mlflow_store import MlflowStore
from farm.study.grid import expand
from farm.study.load import load_study



def _result(trial) -> TrialResult:
    metrics = RunMetrics(successful_requests=48, total_requests=48, success_rate=1.0, duration_s=2.0,
                         total_input_tokens=900, total_output_tokens=900, request_throughput=24, output_tps=450,
                         total_tps=900, ttft_mean_ms=50.0, ttft_p95_ms=80.0)
    runs = [ProfileRun(profile=p, repeat=0, status=Status.ok, metrics=metrics, started_at=1_700_000_000.0)
            for p in trial.profiles]
    return TrialResult(sweep_id="", trial=trial, status=Status.ok, runs=runs, attempt=1, serve_command="guidellm mock-server",
                       started_at=1_700_000_000.0, finished_at=1_700_000_001.0, node="node-a", gpus=[])


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    from farm.store import tracking

    tmp = tmp_path_factory.mktemp("mlflow-shows")
    study = load_study()
    trials = expand(study, "smoke")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    # The last trial as a sweep stored before trials had names logged it: no name at all.
    logged = trials[:-1] + [trials[-1].model_copy(update={"name": None})]
    exp_id, sweep_id = tracking.start_sweep(uri, "first-hour", study, "smoke", logged, command="farm sweep", repeats=1)
    for t in logged:
        res = _result(t)
        res.sweep_id = sweep_id
        tracking.log_trial(uri, exp_id, sweep_id, res, None)
    return {"uri": uri, "exp_id": exp_id, "sweep_id": sweep_id, "trials": trials}


def test_the_experiment_opens_on_its_runs(smoke):
    from farm.store.tracking import client

    exp = client(smoke["uri"]).get_experiment(smoke["exp_id"])
    assert exp.tags[schema.EXPERIMENT_KIND_TAG] == "custom_model_development"


def test_an_existing_experiment_gets_the_kind_unless_one_was_chosen(tmp_path):
    from farm.store.tracking import client, experiment_id

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    c = client(uri)
    bare = c.create_experiment("made-by-an-earlier-farm")
    chosen = c.create_experiment("chosen", tags={schema.EXPERIMENT_KIND_TAG: "genai_development"})
    assert experiment_id(uri, "made-by-an-earlier-farm") == bare
    assert experiment_id(uri, "chosen") == chosen
    assert c.get_experiment(bare).tags[schema.EXPERIMENT_KIND_TAG] == "custom_model_development"
    assert c.get_experiment(chosen).tags[schema.EXPERIMENT_KIND_TAG] == "genai_development"


def test_trial_runs_are_named_by_what_sets_them_apart(smoke):
    from farm.store.tracking import trial_runs

    names = sorted(r.info.run_name for r in trial_runs(smoke["uri"], smoke["sweep_id"]))
    last = smoke["trials"][-1]
    assert names == sorted(["ttft-ms=50 itl-ms=10", "ttft-ms=50 itl-ms=40", "ttft-ms=200 itl-ms=10", last.id])


def test_farm_status_and_the_report_read_the_names_and_the_older_trial_by_its_id(smoke):
    store = MlflowStore(smoke["uri"])
    labels = {t.id: t.label for t in store.trials(smoke["sweep_id"])}
    ids = [t.id for t in smoke["trials"]]
    assert labels[ids[0]] == "ttft-ms=50 itl-ms=10"
    assert labels[ids[-1]] == ids[-1]  # stored without a name: its hash, as before
    records = store.records(smoke["sweep_id"], load_study()).records
    assert {r.label for r in records if r.trial == ids[1]} == {"ttft-ms=50 itl-ms=40"}


def test_farm_report_writes_files_only_with_out_and_says_where(smoke, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from farm.cli.main import cli

    monkeypatch.chdir(tmp_path)
    plain = CliRunner().invoke(cli, ["report", smoke["sweep_id"], "--tracking-uri", smoke["uri"]])
    assert plain.exit_code == 0, plain.output
    assert "ttft-ms=50 itl-ms=10" in plain.stdout and "wrote" not in plain.stderr
    assert list(tmp_path.iterdir()) == []
    out = tmp_path / "rep"
    told = CliRunner().invoke(cli, ["report", smoke["sweep_id"], "--tracking-uri", smoke["uri"], "--out", str(out)])
    assert told.exit_code == 0, told.output
    assert f"to {out}" in told.stderr and "report.md" in told.stderr
    assert (out / "report.md").is_file() and any((out / "plots").glob("*.png"))
