"""`farm sweep --resume SWEEP_ID` of a sweep whose every trial finished: nothing is left to run, so
the command answers from the store (the recommendation again, the sweep marked finished) without
starting Ray. (A sweep with a trial left still starts it: tests/unit/cli/test_partial_sweep.py.)

The finished sweep is written by farm's own writer (`farm.store.tracking`, what the actors and
the driver call) into a real SQLite MLflow; `farm sweep` runs as a user runs it, with Ray's
session directory (`RAY_TMPDIR`) a folder of the test's own: a Ray that starts writes its session there.
"""

from __future__ import annotations

import json
import shutil

from conftest import run_farm
from farm.engines import get_engine
from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.store import tracking
from farm.study.grid import expand
from farm.study.load import load_study
from sweeptools import ray_tmpdir, write_study


def _metrics(tps: float) -> RunMetrics:
    return RunMetrics(successful_requests=8, total_requests=8, success_rate=1.0, duration_s=2.0,
                      total_input_tokens=tps, total_output_tokens=tps, request_throughput=4.0, output_tps=tps / 2,
                      total_tps=tps, ttft_mean_ms=50.0, ttft_p95_ms=80.0, tpot_mean_ms=10.0)


def _sweep(tmp_path, *, finished: int):
    """A sweep of a 2-trial mock study, `finished` of its trials stored ok (fast before slow)."""
    path = write_study(tmp_path / "study.yaml", name="resume-done", grid="g", max_concurrent=1, blocks=[
        {"name": "fast", "engine": "mock", "models": ["tiny"], "flags": {"ttft-ms": 5, "itl-ms": 1}},
        {"name": "slow", "engine": "mock", "models": ["tiny"], "flags": {"ttft-ms": 50, "itl-ms": 10}}])
    study = load_study(path)
    trials = expand(study, "g")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    exp_id, sweep_id = tracking.start_sweep(uri, study.experiment_name, study, "g", trials,
                                            command=f"farm sweep --config {path} --grid g", repeats=1)
    engine = get_engine("mock")
    for n, (trial, tps) in enumerate(zip(trials[:finished], (900.0, 300.0))):
        result = TrialResult(sweep_id=sweep_id, trial=trial, status=Status.ok, attempt=1, node="node-a",
                             node_id="a" * 32, serve_command=engine.serve_command(study.engines["mock"], trial),
                             started_at=1_700_000_000.0 + 10 * n, finished_at=1_700_000_005.0 + 10 * n,
                             runs=[ProfileRun(profile="p", repeat=0, status=Status.ok, metrics=_metrics(tps),
                                              started_at=1_700_000_001.0 + 10 * n)])
        tracking.log_trial(uri, exp_id, sweep_id, result, None)
    tracking.finish_sweep(uri, sweep_id, "finished" if finished == len(trials) else "killed")
    return path, uri, sweep_id, trials


def _resume(tmp_path, path, uri, sweep_id, ray_dir, *extra):
    return run_farm("sweep", "--config", str(path), "--grid", "g", "--tracking-uri", uri, "--workdir",
                    str(tmp_path / "runs"), "--resume", sweep_id, *extra, cwd=tmp_path,
                    env={"RAY_TMPDIR": str(ray_dir)}, timeout=300)


def test_a_finished_sweep_resumed_answers_from_the_store_without_starting_ray(tmp_path):
    path, uri, sweep_id, trials = _sweep(tmp_path, finished=2)
    ray_dir = ray_tmpdir()
    try:
        _check_no_ray(tmp_path, path, uri, sweep_id, trials, ray_dir)
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)


def _check_no_ray(tmp_path, path, uri, sweep_id, trials, ray_dir):
    proc = _resume(tmp_path, path, uri, sweep_id, ray_dir, "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    fast = next(t for t in trials if t.name == "fast")
    assert summary["sweep_id"] == sweep_id and summary["status"] == "finished"
    assert summary["recommended"]["trial"] == fast.id and "--ttft-ms=5" in summary["recommended"]["command"]
    assert summary["counts"]["trials"] == summary["counts"]["ok"] == 2
    assert "resumed: 2 trial(s) already finished were not run again" in proc.stderr
    assert "Ray dashboard" not in proc.stderr
    assert not any(ray_dir.iterdir()), "a Ray session was started"
    assert not (tmp_path / "runs").exists(), "a trial was started"
    from mlflow.tracking import MlflowClient

    assert MlflowClient(uri).get_run(sweep_id).data.tags["farm.status"] == "finished"
    # --quiet reads it back the same way: the command and the sweep id, still no Ray
    quiet = _resume(tmp_path, path, uri, sweep_id, ray_dir, "--quiet")
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert quiet.stdout.splitlines() == [summary["recommended"]["command"], f"sweep id: {sweep_id}"]
    assert not any(ray_dir.iterdir())
