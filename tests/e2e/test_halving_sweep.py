"""`farm sweep --strategy halving` end to end through the CLI: real Ray (the session's, tests/conftest.py),
MLflow, guidellm and mock-server engines. One sweep of two trials (two rungs) is shared by every assert: Ctrl-C
once rung 2's engine runs, then `--resume SWEEP_ID` (without --strategy or --budget: the sweep's run
says what it is) continues at rung 2 without running rung 1 again."""

from __future__ import annotations

import json
import signal

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_farm
from sweeptools import child_runs, engine_of, start_farm, wait_until, write_study

pytestmark = pytest.mark.slow

BUDGET = 1.0  # GPU-hours (a trial of the mock engine counts as one GPU): rung 2 must fit on a loaded 2-core machine


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, ray_head):
    from farm.study.grid import expand
    from farm.study.load import load_study

    tmp = tmp_path_factory.mktemp("halving")
    # Latency-bound runs (24 tokens at 20 or 60 ms each): a run of the fast trial lasts about a
    # second, so its throughput is set by the mock's latencies and not by how busy the 2 cores are
    # (at 5 ms a token a run lasted 0.1 s and its samples spread too wide for rung 1 to stop anything).
    # The slow trial is ~3x slower, far past rung 1's test; at 150 ms (~7x) its three runs held rung 1
    # (and so the fixture) 22 s rather than 9.
    short = {"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 24}, "rate": 1000,
             "max_concurrency": 4, "max_seconds": 60, "slo": {"min_success_rate": 0.5}}
    path = write_study(
        tmp / "halving.yaml", name="halving", grid="race", max_concurrent=2,
        blocks=[{"engine": "mock", "models": ["tiny"], "name": "best", "flags": {"ttft-ms": 5, "itl-ms": 20}},
                {"engine": "mock", "models": ["tiny"], "name": "slow", "flags": {"ttft-ms": 5, "itl-ms": 60}}],
        profile={**short, "requests": 24},
    )
    data = __import__("yaml").safe_load(path.read_text())
    data["profiles"]["q"] = {**short, "requests": 8}
    path.write_text(__import__("yaml").safe_dump(data, sort_keys=False))
    ids = {t.name: t.id for t in expand(load_study(path), "race")}
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    # Both legs on the session's Ray head: Ray's own start and end with a Ctrl-C'd driver are
    # test_resume.py's, and two starts of a local Ray cost this module ~8 s (58 -> 50 s).
    args = ["sweep", "--config", str(path), "--grid", "race", "--tracking-uri", uri, "--workdir", str(tmp / "runs"),
            "--address", ray_head]
    log1 = tmp / "first.out"
    first = start_farm(*args, "--strategy", "halving", "--budget", str(BUDGET), cwd=tmp, log=log1)
    try:
        # Ctrl-C once rung 2's engine runs (the driver then waits on Ray, not in the middle of a store write).
        wait_until(lambda: first.poll() is not None or ("rung 2 of 2" in log1.read_text()
                                                        and engine_of(tmp / "runs" / "pass-2", ids["best"]) is not None),
                   400, what="rung 2's engine to start")
        if first.poll() is None:
            first.send_signal(signal.SIGINT)
        first.wait(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    out1 = log1.read_text()
    sweep_id = next(line.split("--resume ")[1].strip() for line in out1.splitlines() if "--resume " in line)
    rung1_runs = {r.data.tags["farm.trial_id"]: r.info.run_id for r in child_runs(uri, sweep_id)}
    log2 = tmp / "second.out"
    second = start_farm(*args, "--resume", sweep_id, cwd=tmp, log=log2)
    second.wait(timeout=400)
    c = MlflowClient(uri)
    halving = json.loads(c.download_artifacts(sweep_id, "halving.json", str(tmp)) and (tmp / "halving.json").read_text())
    return dict(ids=ids, out1=out1, out2=log2.read_text(), rc1=first.returncode, rc2=second.returncode, uri=uri,
                sweep_id=sweep_id, rung1_runs=rung1_runs, halving=halving)


def test_the_significantly_worse_trial_stops_at_rung_1(sweep):
    assert sweep["rc1"] == 130, sweep["out1"][-3000:]
    stops = {s["trial"]: s for s in sweep["halving"]["stops"]}
    assert sweep["ids"]["slow"] in stops, (stops, sweep["out1"][-3000:])
    slow = stops[sweep["ids"]["slow"]]
    assert (slow["rung"], slow["kind"]) == (1, "significantly_worse"), stops
    assert "significantly worse than the leader" in sweep["out2"]


def test_the_known_best_survives_and_is_recommended(sweep):
    assert sweep["rc2"] == 0, sweep["out2"][-3000:]
    assert sweep["ids"]["best"] not in {s["trial"] for s in sweep["halving"]["stops"]}
    assert "last rung done: 1 trial(s) measured on every profile" in sweep["out2"]
    rec = sweep["out2"].split("recommendation")[-1]
    assert "--ttft-ms=5 --itl-ms=20" in rec, rec


def test_the_budget_is_never_exceeded(sweep):
    h = sweep["halving"]
    assert h["budget_gpu_hours"] == BUDGET
    assert 0 < h["spent_gpu_hours"] <= BUDGET
    assert set(h["spent_by_rung"]) == {"1", "2"}
    assert "rung 1:" in sweep["out2"] and "GPU-hours" in sweep["out2"]


def test_resume_continues_at_its_rung(sweep):
    out2 = sweep["out2"]
    assert "rung 2 of 2" in out2 and "rung 1 of 2" not in out2, out2[-3000:]
    runs = child_runs(sweep["uri"], sweep["sweep_id"])
    # Each trial keeps its one child run: rung 1's, to which rung 2 was appended.
    assert sorted(r.data.tags["farm.trial_id"] for r in runs) == sorted(sweep["rung1_runs"])
    assert {r.data.tags["farm.trial_id"]: r.info.run_id for r in runs} == sweep["rung1_runs"]


def test_farm_report_of_the_resumed_sweep_shows_its_rungs_and_stops(sweep):
    """The report rebuilt from MLflow has the sweep's own Halving section: each rung's spend and
    why the slow trial stopped, over both legs of the sweep (interrupted, then resumed)."""
    args = ["report", sweep["sweep_id"], "--tracking-uri", sweep["uri"]]
    md = run_farm(*args, "--format", "markdown")
    assert md.returncode == 0, md.stderr[-3000:]
    section = md.stdout.split("## Halving\n\n")[1].split("\n## ")[0]
    for r, h in sweep["halving"]["spent_by_rung"].items():
        assert f"- rung {r}: {h:.3f} GPU-hours" in section, section
    assert "- stopped slow: rung 1: significantly worse than the leader" in section, section
    assert section.startswith(f"halving: {sweep['halving']['spent_gpu_hours']:.3f} GPU-hours spent "
                              f"(budget {BUDGET:g} GPU-hours); last rung done"), section
    js = run_farm(*args, "--format", "json")
    assert js.returncode == 0, js.stderr[-3000:]
    (h,) = json.loads(js.stdout)["halving"]
    assert h["spent_by_rung"] == sweep["halving"]["spent_by_rung"] and h["done"]
    assert [(s["label"], s["rung"], s["kind"]) for s in h["stops"]] == [("slow", 1, "significantly_worse")]
