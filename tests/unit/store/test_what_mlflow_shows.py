"""What a user sees of a sweep in MLflow, on a real SQLite MLflow written by farm's own writer:
the experiment opens on its runs (its kind is classic ML, not GenAI), the sweep's run is named by
its study, grid and start, each trial's run by what sets it apart, not by its hash (a sweep stored
before trials had names still reads), and farm's trials link opens a stored view of the sweep's
trials with their numbers as columns, best first (what MLflow's UI makes of it: the browser test,
tests/e2e/test_sweep_answer_cli.py)."""

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


def test_the_sweep_run_is_named_by_its_study_grid_and_start(smoke):
    import re

    from farm.store.tracking import client

    name = client(smoke["uri"]).get_run(smoke["sweep_id"]).info.run_name
    assert re.fullmatch(r"qwen3\.5-35b-a3b-h200 · grid smoke · \d{4}-\d\d-\d\d \d\d:\d\d", name), name
    assert MlflowStore(smoke["uri"]).sweep(smoke["sweep_id"]).name == name  # what `farm status` prints


def test_the_trials_link_opens_the_sweeps_trials_with_their_numbers_best_first(smoke):
    import json
    from urllib.parse import parse_qs, urlsplit

    from farm.run.links import mlflow_trials_link
    from farm.store.tracking import client

    c = client(smoke["uri"])
    link = urlsplit(mlflow_trials_link(smoke["uri"], smoke["exp_id"], smoke["sweep_id"]))
    path, _, query = link.fragment.partition("?")
    assert path == f"/experiments/{smoke['exp_id']}/runs"
    # the stored view alone: a search parameter beside it would make MLflow's UI ignore the view
    assert parse_qs(query) == {"viewStateShareKey": [smoke["sweep_id"]], "workflowType": ["machine_learning"]}
    view = json.loads(c.get_experiment(smoke["exp_id"]).tags[f"mlflow.sharedViewState.{smoke['sweep_id']}"])
    # MLflow's search, as the UI asks it: the sweep's trials only, the primary profile's throughput first
    assert view["orderByKey"] == "metrics.`smoke_chat/total_tps`" and view["orderByAsc"] is False
    found = c.search_runs([smoke["exp_id"]], filter_string=view["searchFilter"],
                          order_by=["metrics.`smoke_chat/total_tps` DESC"])
    assert sorted(r.info.run_id for r in found) == sorted(r.info.run_id for r in c.search_runs(
        [smoke["exp_id"]], filter_string=f"tags.`farm.sweep_id` = '{smoke['sweep_id']}' and tags.`farm.kind` = 'trial'"))
    cols = view["selectedColumns"]
    assert cols[:7] == ["metrics.`smoke_chat/total_tps`", "metrics.`smoke_chat/ttft_mean_ms`",
                        "metrics.`smoke_chat/tpot_mean_ms`", "metrics.`smoke_chat/usd_per_m_total_tokens`",
                        "metrics.`smoke_chat/total_tokens_per_j`", "tags.`farm.recommended`", "tags.`farm.verdict`"]
    assert view["columnOrder"] == cols and set(view["columnWidths"]) == set(cols)
    logged = found[0].data.metrics
    assert "smoke_chat/total_tps" in logged and "smoke_generation/ttft_mean_ms" in logged
    metrics = [c.removeprefix("metrics.").strip("`") for c in cols if c.startswith("metrics.")]
    # every metric column names one farm logs for a trial, per profile of the grid
    assert {m.split("/")[0] for m in metrics} == {"smoke_chat", "smoke_generation"}
    assert all(m.split("/")[1] in schema.METRICS + schema.COST_METRICS + schema.ENERGY_METRICS for m in metrics), metrics
    assert [c for c in cols if not c.startswith("metrics.")] == [
        "tags.`farm.recommended`", "tags.`farm.verdict`", "tags.`farm.status`"]


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
