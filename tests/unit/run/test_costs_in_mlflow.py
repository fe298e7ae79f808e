"""Where users look (issue 50 item 4), on the committed H200 store (bench/h200/store.tgz, real MLflow):
the sweep's end writes each trial's dollars per million tokens onto its run, the stored shared view of
the trials shows the cost and energy columns, and the sweep's run note leads with the report's first
screen (the command, each decision, cost and energy against the baseline)."""

from __future__ import annotations

import json
import tarfile

import pytest

from conftest import REPO
from farm.analysis.records import records_from_trials
from farm.run.sweep_report import annotate, build_from_records
from farm.store import schema as S
from farm.store import tracking
from farm.store.mlflow_store import MlflowStore


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("h200-store")
    with tarfile.open(REPO / "bench/h200/store.tgz") as tar:
        tar.extractall(tmp, filter="data")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    sweep_id = (tmp / "sweep-id").read_text().split()[0]
    store = MlflowStore(uri)
    study = store.study(sweep_id).model_copy(update={"prices": {"H200": 3.5}})
    grid = store.sweep(sweep_id).grid
    results = tracking.load_results(uri, sweep_id)
    report, why, _ = build_from_records(study, grid, records_from_trials(results, study, grid=grid,
                                                                        sweep_id=sweep_id), None)
    assert report is not None, why
    annotate(uri, sweep_id, report, None, results, heading="h200")
    return uri, sweep_id, report


def test_each_priced_trial_gets_its_dollars_per_million_tokens(h200):
    uri, sweep_id, report = h200
    primary = report.selection.primary_profile
    rec = report.selection.recommended.trial
    run = tracking.client(uri).get_run(tracking.trial_run_ids(uri, sweep_id)[rec])
    expected = report.costs.trial(rec)
    pc = next(p for p in expected.profiles if p.profile == primary)
    assert run.data.metrics[f"{primary}/usd_per_m_total_tokens"] == pytest.approx(pc.usd_per_m_total.value)
    assert run.data.metrics[f"{primary}/usd_per_m_output_tokens"] == pytest.approx(pc.usd_per_m_output.value)
    assert 0.05 < pc.usd_per_m_total.value < 0.15


def test_the_stored_view_shows_cost_and_energy_beside_the_primary_throughput():
    view = S.trials_view("s" * 32, ["chat", "long"], "chat")
    cols = view["selectedColumns"]
    assert cols[:5] == ["metrics.`chat/total_tps`", "metrics.`chat/ttft_mean_ms`", "metrics.`chat/tpot_mean_ms`",
                        "metrics.`chat/usd_per_m_total_tokens`", "metrics.`chat/total_tokens_per_j`"]
    assert "metrics.`long/usd_per_m_total_tokens`" not in cols  # the primary's alone: columns enough to read
    assert json.loads(json.dumps(view)) == view


def test_the_sweeps_note_leads_with_the_first_screen(h200):
    uri, sweep_id, report = h200
    note = tracking.client(uri).get_run(sweep_id).data.tags[S.NOTE_TAG]
    head = note.split("**Verdict per profile**", 1)[0]
    assert report.selection.recommended.command in head
    assert "**Decisions**" in head and "(baseline): " in head
    assert "Dollars per million tokens (prompt + output) on `sharegpt_synthetic`, at H200 $3.5 per GPU-hour" in head
    assert "Energy per million tokens" in head and "not measured for recommended or baseline (not recorded" in head
