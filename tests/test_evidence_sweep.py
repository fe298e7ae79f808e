"""End to end: a mock sweep with `--repeats 3` through the CLI (local Ray, real guidellm, real
mock-server engines, temporary MLflow) whose report shows intervals and a significance verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import REPO, run_farm

pytestmark = pytest.mark.slow

# Two mock configurations, both profiles of the smoke study: the engine default (the baseline,
# TTFT 150 ms) and TTFT 50 ms, which is clearly faster on both.
STUDY = f"""
include: [{REPO / 'configs' / 'smoke.yaml'}]
name: evidence-smoke
experiment: evidence-smoke
primary_profile: smoke_chat
grids:
  evidence:
    profiles: [smoke_chat, smoke_generation]
    max_concurrent_trials: 2
    blocks:
      - {{engine: mock, models: [tiny]}}
      - {{engine: mock, models: [tiny], flags: {{ttft-ms: 50}}}}
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("evidence")
    (tmp / "study.yaml").write_text(STUDY)
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    proc = run_farm("sweep", "--config", str(tmp / "study.yaml"), "--grid", "evidence", "--repeats", "3",
                    "--tracking-uri", uri, "--workdir", str(tmp / "runs"), cwd=tmp)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sweep_id = next(line.split()[2] for line in proc.stdout.splitlines() if line.startswith("sweep id:"))
    return proc, uri, sweep_id, tmp


def test_the_sweep_says_the_faster_mock_wins_with_its_interval(sweep):
    proc, _, _, _ = sweep
    out = proc.stdout
    command = out.split("recommended", 1)[1].splitlines()[1]
    assert "--ttft-ms=50" in command
    evidence = next(line for line in out.splitlines() if line.startswith("evidence:"))
    assert "wins on smoke_chat" in evidence and "[" in evidence and "Holm p" in evidence and "3 vs 3 runs" in evidence


def test_the_report_shows_intervals_and_the_verdict(sweep):
    _, uri, sweep_id, tmp = sweep
    text = run_farm("report", sweep_id, "--tracking-uri", uri, cwd=tmp)
    assert text.returncode == 0, text.stderr
    assert "Intervals and verdicts (mean [95 % CI] over the repeats)" in text.stdout
    assert "Evidence: " in text.stdout and "wins on `smoke_chat`" not in text.stdout  # text, not markdown
    assert "wins on smoke_chat, its lead is significant" in text.stdout
    data = json.loads(run_farm("report", sweep_id, "--tracking-uri", uri, "--format", "json", cwd=tmp).stdout)
    verdicts = {v["profile"]: v for v in data["verdicts"]}
    assert verdicts["smoke_chat"]["decision"] == "winner"
    rows = [t for t in data["trials"] if t["profile"] == "smoke_chat"]
    assert len(rows) == 2 and all(t["repeats"] == 3 for t in rows)
    for row in rows:
        for metric in ("total_tps", "output_tps", "ttft_mean_ms", "tpot_mean_ms"):
            st = row["stats"][metric]
            assert st["n"] == 3 and st["ci_low"] <= st["mean"] <= st["ci_high"]
    gain = data["comparison"][0]["delta"]
    assert gain["significant"] and gain["ci_low_pct"] > 10
    assert data["cross_profile"]["recommended"] == data["recommended"]["trial"]


def test_each_trial_is_one_child_run_with_every_repeat(sweep):
    _, uri, sweep_id, _ = sweep
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("evidence-smoke")
    children = client.search_runs([exp.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{sweep_id}'")
    assert len(children) == 2
    for child in children:
        history = client.get_metric_history(child.info.run_id, "smoke_chat/runs/total_tps")
        assert sorted(m.step for m in history) == [0, 1, 2]
    files = {a.path for a in client.list_artifacts(sweep_id, "report")}
    assert {"report/report.md", "report/results.json"} <= files
