"""`farm sweep --strategy local --from COMMAND` end to end through the CLI: real Ray (the session's,
tests/conftest.py), MLflow, guidellm and mock-server engines. From the slow corner of a 2 x 2 grid, the search moves only on
significant evidence and ends at the fast corner; the report answers "your command vs farm's";
a resumed sweep that is done runs nothing again; a command farm cannot start from is one line."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_farm
from sweeptools import write_study

SLOW = "guidellm mock-server --model farm-tiny --ttft-ms 150 --itl-ms 150"


def _study(tmp):
    # Latency-bound runs (4 tokens, 2 requests at once): each trial's rate is set by its mock's
    # latencies, not by how busy the 2 cores are (tokens/s: ~11 at the slow corner, ~13 and ~35 at its
    # neighbours, ~94 at the fast corner). 6 requests: 3 rounds of 2, a run of the slow corner lasts
    # ~2.3 s (at 12 tokens and 8 requests, ~8 s: its runs were most of the fixture's 217 s).
    # Two trials at once: a step's trials race side by side. Each step's best neighbour is ~3x its
    # start (above), and the rates are bound by the mocks' latencies, so sharing the cores moves no step.
    return write_study(tmp / "local.yaml", name="local", grid="corners", max_concurrent=2,
                       blocks=[{"engine": "mock", "models": ["tiny"],
                                "axes": {"ttft-ms": [5, 150], "itl-ms": [20, 150]}}],
                       profile={"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 4}, "rate": 1000,
                                "requests": 6, "max_concurrency": 2, "max_seconds": 90,
                                "slo": {"min_success_rate": 0.5}})


@pytest.fixture(scope="module")
def search(tmp_path_factory, ray_head):
    tmp = tmp_path_factory.mktemp("local")
    path, uri = _study(tmp), f"sqlite:///{tmp / 'mlflow.db'}"
    proc = run_farm("sweep", "--config", str(path), "--grid", "corners", "--strategy", "local", "--from", SLOW,
                    "--tracking-uri", uri, "--workdir", str(tmp / "runs"), "--address", ray_head, cwd=tmp, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    sweep_id = next(line.split()[2] for line in proc.stdout.splitlines() if line.startswith("sweep id:"))
    return proc, uri, sweep_id, tmp, path, ray_head


@pytest.mark.slow
def test_from_the_slow_corner_the_search_ends_at_the_fast_corner(search):
    proc, *_ = search
    recommended = proc.stdout.split("recommended:", 1)[1].splitlines()[1]
    assert "--ttft-ms=5 " in recommended + " " and "--itl-ms=20" in recommended
    out = proc.stdout
    assert "local search step 1" in out and "moved to" in out and "farm's pick" in out


@pytest.mark.slow
def test_the_report_answers_your_command_against_farms_pick(search):
    _, uri, sweep_id, tmp, _, _ = search
    report = run_farm("report", sweep_id, "--tracking-uri", uri, "--format", "json", cwd=tmp)
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    (local,) = data["local_search"]
    assert local["done"] and local["incumbent"] != local["start"]
    (row,) = local["final_comparison"]
    # the final comparison: 3 runs each on the profile, the pick significantly ahead with an interval
    assert row["pick_runs"] == row["start_runs"] == 3 and row["significant"] and row["ci_low_pct"] > 0
    # every step that moved did so on a significant lead at its own alpha
    for step in local["steps"]:
        if step["outcome"] == "moved":
            best = next(j for j in step["judged"] if j["neighbour"]["trial"] == step["moved_to"])
            assert best["better"] and best["p_holm"] < step["alpha"]
    # the user's command is the report's baseline: "before and after" is your command vs farm's
    assert data["baseline"]["trial"] == local["start"]
    # the path is stored with the sweep, and the start with its study
    c = MlflowClient(uri)
    assert c.get_run(sweep_id).data.tags["farm.strategy"] == "local"


@pytest.mark.slow
def test_a_finished_search_resumed_runs_nothing_again(search):
    _, uri, sweep_id, tmp, path, ray_head = search
    before = {r.info.run_id: r.data.tags.get("farm.passes") for r in MlflowClient(uri).search_runs(
        [MlflowClient(uri).get_run(sweep_id).info.experiment_id], filter_string="tags.`farm.kind` = 'trial'")}
    proc = run_farm("sweep", "--config", str(path), "--grid", "corners", "--resume", sweep_id, "--tracking-uri", uri,
                    "--workdir", str(tmp / "runs2"), "--address", ray_head, cwd=tmp, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "start " not in "\n".join(line for line in proc.stdout.splitlines() if line.startswith("["))
    after = {r.info.run_id: r.data.tags.get("farm.passes") for r in MlflowClient(uri).search_runs(
        [MlflowClient(uri).get_run(sweep_id).info.experiment_id], filter_string="tags.`farm.kind` = 'trial'")}
    assert after == before


@pytest.mark.slow
def test_a_search_resumed_midway_through_a_step_races_its_incumbent_again_first(search, tmp_path):
    """A lent GPU machine lasts one sitting: a step resumed on the next machine would race its
    remaining trials where the incumbent never ran, and they could not be told from it. On a resume
    that picks up a step midway (here: one of step 1's neighbours lost, as with a machine taken back
    mid-trial), the incumbent is raced again first, as a control of itself, and the search goes on
    to the same answer."""
    import shutil

    _, uri, sweep_id, tmp, path, ray_head = search
    store = tmp_path / "store"
    store.mkdir()
    shutil.copy(tmp / "mlflow.db", store / "mlflow.db")
    uri2 = f"sqlite:///{store / 'mlflow.db'}"
    before = json.loads(run_farm("report", sweep_id, "--tracking-uri", uri2, "--format", "json", cwd=tmp).stdout)
    (ls,) = before["local_search"]
    step = ls["steps"][0]
    incumbent, lost = step["incumbent"], next(t for t in step["race"][1:] if t != step.get("moved_to"))
    client = MlflowClient(uri2)
    exp = client.get_run(sweep_id).info.experiment_id
    (run,) = client.search_runs([exp], filter_string=f"tags.`farm.trial_id` = '{lost}'")
    client.delete_run(run.info.run_id)
    proc = run_farm("sweep", "--config", str(path), "--grid", "corners", "--resume", sweep_id, "--tracking-uri", uri2,
                    "--workdir", str(tmp_path / "runs"), "--address", ray_head, cwd=tmp, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    starts = [line for line in proc.stdout.splitlines() if line.startswith("[") and "] start " in line]
    assert starts and "@resume1.1" in starts[0], starts
    control = client.search_runs([exp], filter_string=f"tags.`farm.trial_id` = '{incumbent}@resume1.1'")
    assert len(control) == 1 and control[0].data.tags.get("farm.status") == "ok"
    after = json.loads(run_farm("report", sweep_id, "--tracking-uri", uri2, "--format", "json", cwd=tmp).stdout)
    assert after["recommended"] == before["recommended"]
    (ls_after,) = after["local_search"]
    # the incumbent's runs of step 1: its own and its control's, one sample on the one machine here
    assert ls_after["steps"][0]["incumbent_runs"] > step["incumbent_runs"]


@pytest.mark.parametrize("args, words", [
    (["--from", SLOW], "--from: only with --strategy local"),
    (["--strategy", "local"], "--strategy: --strategy local starts from the serve command you run today"),
    (["--strategy", "local", "--from", SLOW.replace("150 --itl", "99 --itl")], "matches no trial of grid 'corners'"),
    (["--strategy", "local", "--from", SLOW + " --no-such-flag"], "mock takes no flag '--no-such-flag'"),
])
def test_a_start_farm_cannot_use_is_one_line_and_nothing_is_written(tmp_path, args, words):
    path = _study(tmp_path)
    proc = run_farm("sweep", "--config", str(path), "--grid", "corners", *args,
                    "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert words in line and "Traceback" not in proc.stderr
    assert not (tmp_path / "mlflow.db").exists()
