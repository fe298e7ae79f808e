"""End to end: capacity under an SLO through the CLI (the session's Ray head, real guidellm, mock-servers behind
farm's admission gate, a temporary SQLite MLflow).

The default study's `smoke_capacity` grid: two mock configurations that serve 1 and 3 requests at
once (the rest queue), searched over concurrency 1, 2, 4 then bisection under a 450 ms P95
TTFT. Past its admission limit a trial's queued requests wait one service time (about 0.36 s), so
each trial's capacity is its admission limit. Then a study whose SLO no trial meets at its lowest
load: the sweep says so in one line and exits 3.
"""

from __future__ import annotations

import json
import os

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_farm
from sweeptools import write_study

pytestmark = pytest.mark.slow

PROFILE = "smoke_capacity"
LADDER = [1, 2, 4]


@pytest.fixture(scope="module")
def swept(tmp_path_factory, ray_head):
    tmp = tmp_path_factory.mktemp("capacity")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    # on the session's Ray head: Ray's own start is not this test's subject (tests/conftest.py)
    proc = run_farm("sweep", "--grid", "smoke_capacity", "--json", "--tracking-uri", uri, "--workdir", str(tmp / "runs"),
                    "--address", ray_head, cwd=tmp)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    client = MlflowClient(uri)
    report = client.download_artifacts(summary["sweep_id"], "report/report.md", str(tmp))
    trials = {}
    for run in client.search_runs([client.get_run(summary["sweep_id"]).info.experiment_id],
                                  filter_string="tags.`farm.kind` = 'trial'"):
        history = sorted(client.get_metric_history(run.info.run_id, f"{PROFILE}/load"), key=lambda m: m.step)
        trials[run.data.tags["farm.trial_id"]] = {
            "limit": int(run.data.params["flag.admission-limit"]), "run_id": run.info.run_id,
            "steps": [m.step for m in history], "loads": [m.value for m in history]}
    return {"proc": proc, "uri": uri, "summary": summary, "report": open(report).read(), "trials": trials}


def _limit(command: str) -> int:
    return int(command.split("--limit ")[1].split()[0])


def _ranking(swept):
    return swept["summary"]["capacity"][PROFILE]


def _within_a_ladder_step(found: float, known: int) -> bool:
    below = max([x for x in LADDER if x <= known], default=LADDER[0])
    above = min([x for x in LADDER if x > known], default=LADDER[-1])
    return below <= found <= above


def test_each_trial_s_capacity_is_its_admission_limit_and_they_rank_by_it(swept):
    ranking = _ranking(swept)
    limits = {t: v["limit"] for t, v in swept["trials"].items()}
    assert set(limits.values()) == {1, 3}
    for row in ranking["trials"]:
        limit = limits[row["trial"]]
        assert row["capacity"] is not None and _within_a_ladder_step(row["capacity"], limit), row
        # the interval holds the known value: from a load that met the SLO to the lowest that broke it
        assert row["capacity"] <= limit and (row["high"] is None or limit < row["high"]), row
        assert row["runs"] <= 4  # the profile's max_runs
    assert [limits[r["trial"]] for r in ranking["trials"]] == [3, 1]  # most capacity first
    assert ranking["decision"] == "winner" and limits[ranking["recommended"]] == 3
    rec = swept["summary"]["recommended"]
    assert rec["trial"] == ranking["recommended"] and _limit(rec["command"]) == 3
    # what the person sees at the end of the sweep: the capacity, not a throughput at a fixed load
    assert "concurrent requests" in swept["proc"].stderr.split("recommended: trial", 1)[1].splitlines()[0]


def test_the_report_shows_every_load_tried(swept):
    text = swept["report"]
    assert f"## Capacity under the SLO: {PROFILE}" in text and "every load tried" in text
    for row in _ranking(swept)["trials"]:
        loads = swept["trials"][row["trial"]]["loads"]
        assert loads[0] == 1 and len(loads) == row["runs"]
        lines = [line for line in text.splitlines() if line.startswith(f"| {row['label']} | ")]
        tried = [float(line.split("|")[2]) for line in lines if line.split("|")[3].strip() in ("yes", "no")]
        assert sorted(tried) == loads
        broke = [line for line in lines if line.split("|")[3].strip() == "no"]
        assert broke and all("P95 TTFT" in line for line in broke)


def test_plots_and_search_steps_are_in_mlflow(swept):
    client = MlflowClient(swept["uri"])
    # in report/plots/, as report.md links them
    plots = {os.path.basename(a.path) for a in client.list_artifacts(swept["summary"]["sweep_id"], "report/plots")}
    assert {f"capacity_curves_{PROFILE}.png", f"capacity_{PROFILE}.png"} <= plots
    # the sweep's run carries the recommendation's capacity, for the experiment's table
    assert client.get_run(swept["summary"]["sweep_id"]).data.metrics[f"recommended/{PROFILE}/capacity"] == 3
    for trial in swept["trials"].values():
        # step k is the k-th load, lowest first: MLflow's chart of each metric is the curve
        assert trial["steps"] == list(range(len(trial["loads"]))) and trial["loads"] == sorted(trial["loads"])
        assert len(client.get_metric_history(trial["run_id"], f"{PROFILE}/ttft_p95_ms")) == len(trial["loads"])


@pytest.fixture(scope="module")
def missed(tmp_path_factory, ray_head):
    tmp = tmp_path_factory.mktemp("capacity-miss")
    profile = {"kind": "capacity", "data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8},
               "requests": 3, "max_seconds": 60,
               "slo": {"ttft_p95_ms_max": 100, "min_success_rate": 0.5},
               "capacity": {"over": "concurrency", "ladder": [1, 2]}}
    # a loaded 2-core runner can take over a minute to start a mock-server: a slow start is not this test's subject
    study = write_study(tmp / "study.yaml", name="capacity-miss", grid="g", profile=profile, engine={"ready_timeout_s": 300},
                        blocks=[{"name": name, "engine": "mock", "models": ["tiny"],
                                 "flags": {"admission-limit": 1, "ttft-ms": ttft}}
                                for name, ttft in (("fast", 300), ("slow", 900))])
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    return run_farm("sweep", "--config", str(study), "--grid", "g", "--tracking-uri", uri,
                    "--workdir", str(tmp / "runs"), "--address", ray_head, cwd=tmp)


def test_no_trial_meeting_the_slo_is_one_line_and_its_own_exit_code(missed):
    assert missed.returncode == 3, missed.stdout[-3000:] + missed.stderr[-3000:]
    lines = [line for line in missed.stdout.splitlines() if line.startswith("no recommendation: ")]
    assert len(lines) == 1
    line = lines[0]
    assert "no trial meets the SLO of p at its lowest load (1 concurrent requests)" in line
    # the closest trial is the faster one, and the line says by how much it misses
    assert "closest: fast, P95 TTFT" in line and "> 100 ms (+" in line
    assert "recommended:" not in missed.stdout
