"""A local search from a command that cannot start (issue 46): real Ray (the session's head), MLflow,
guidellm and mock-server engines. The mock holds 2 "state blocks" (`state-blocks`, standing in for
a hybrid model's Mamba cache blocks under vLLM), and the user's command asks for every request at
once: its start refuses and names the cap, as vLLM's did on the H100. The search says so, runs
alone first so no neighbour races a start that never served, repairs the command at the named cap,
repairs the neighbour the same way, and answers against the repaired start, which has runs."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_farm
from sweeptools import write_study

SLOW = "guidellm mock-server --model farm-tiny --ttft-ms 150 --itl-ms 20 --state-blocks 2"


@pytest.fixture(scope="module")
def search(tmp_path_factory, ray_head):
    tmp = tmp_path_factory.mktemp("repair")
    # 2 requests at once and 4 output tokens: each trial's rate is its mock's latencies (the fast
    # neighbour's TTFT is 5 ms against 150), whatever the cores do; the cap of 2 slows neither.
    path = write_study(tmp / "repair.yaml", name="repair", grid="capped", max_concurrent=1,
                       blocks=[{"engine": "mock", "models": ["tiny"], "flags": {"itl-ms": 20, "state-blocks": 2},
                                "axes": {"ttft-ms": [5, 150]}}],
                       profile={"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 4}, "rate": 1000,
                                "requests": 6, "max_concurrency": 2, "max_seconds": 90,
                                "slo": {"min_success_rate": 0.5}})
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    proc = run_farm("sweep", "--config", str(path), "--grid", "capped", "--strategy", "local", "--from", SLOW,
                    "--tracking-uri", uri, "--workdir", str(tmp / "runs"), "--address", ray_head, cwd=tmp, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    sweep_id = next(line.split()[2] for line in proc.stdout.splitlines() if line.startswith("sweep id:"))
    report = run_farm("report", sweep_id, "--tracking-uri", uri, "--format", "json", cwd=tmp)
    assert report.returncode == 0, report.stderr
    return proc, uri, sweep_id, json.loads(report.stdout)


@pytest.mark.slow
def test_the_search_says_your_command_does_not_start_and_answers_from_its_repair(search):
    proc, _, _, data = search
    out = proc.stdout
    assert "your command does not start (its start failed)" in out and "max_running_requests = 2" in out
    recommended = proc.stdout.split("recommended:", 1)[1].splitlines()[1]
    # farm's pick is the fast neighbour, repaired the same way: 2 at once through the gate
    assert "--ttft-ms=5" in recommended and "--limit 2" in recommended
    (local,) = data["local_search"]
    assert local["done"] and local["given_start"] and local["start"] != local["given_start"]
    assert {r["trial"] for r in local["repairs"]} >= {local["given_start"]}
    assert all(r["source"] == "engine" and r["value"] == 2 for r in local["repairs"])
    # the answer compares against the repaired start, which has its runs
    (row,) = local["final_comparison"]
    assert row["start_runs"] == row["pick_runs"] == 3 and row["significant"] and row["ci_low_pct"] > 0


@pytest.mark.slow
def test_the_refused_start_is_recorded_with_its_cause_and_ran_before_any_neighbour(search):
    _, uri, sweep_id, data = search
    (local,) = data["local_search"]
    runs = MlflowClient(uri).search_runs([MlflowClient(uri).get_run(sweep_id).info.experiment_id],
                                         f"tags.mlflow.parentRunId = '{sweep_id}'")
    by_trial = {r.data.tags.get("farm.trial_id"): r for r in runs}
    given = by_trial[local["given_start"]]
    assert given.data.tags.get("farm.status") == "oom"
    assert "exceeds the state blocks (2)" in given.data.tags.get("farm.reason", "")
    # nothing else started before the user's command had ended
    others = [r for t, r in by_trial.items() if t != local["given_start"]]
    assert others and all(r.info.start_time >= given.info.end_time for r in others)
