"""A sweep in pieces (`farm sweep --trial NAME`), as one GPU lease at a time allows: the named
trials run now, the grid's others stay pending in the same sweep, and `--resume` runs the rest."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import run_farm
from tests.sweeptools import ray_tmpdir, write_study


def _study(tmp_path):
    return write_study(tmp_path / "study.yaml", name="pieces", grid="g", max_concurrent=1, blocks=[
        {"name": "fast", "engine": "mock", "models": ["tiny"], "flags": {"ttft-ms": 5, "itl-ms": 1}},
        {"name": "slow", "engine": "mock", "models": ["tiny"], "flags": {"ttft-ms": 20, "itl-ms": 4}},
    ])


def test_an_unknown_trial_is_one_line_and_nothing_is_written(tmp_path):
    study = _study(tmp_path)
    out = run_farm("sweep", "--config", str(study), "--grid", "g", "--trial", "nope", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        "error: --trial: no trial 'nope' in this grid (it has: fast, slow)"]
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "farm-runs").exists()


def test_dry_run_of_one_trial_lists_only_it(tmp_path):
    out = run_farm("sweep", "--config", str(_study(tmp_path)), "--grid", "g", "--trial", "slow", "--dry-run",
                   cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "  slow" in out.stdout and "  fast" not in out.stdout


@pytest.mark.slow
def test_one_trial_now_the_rest_on_resume(tmp_path):
    study = _study(tmp_path)
    first = run_farm("sweep", "--config", str(study), "--grid", "g", "--trial", "slow", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    sweep_id = next(line.split()[2] for line in first.stdout.splitlines() if line.startswith("sweep id:"))
    assert "1 trial(s) of the grid not run yet" in first.stdout
    resume = f"--resume {sweep_id}"
    hint = first.stdout.split("not run yet; run them with:")[1].strip().splitlines()[0]
    assert resume in hint and "--trial" not in hint

    status = run_farm("status", sweep_id, cwd=tmp_path)
    assert "partial" in status.stdout and "1 done, 0 failed, 0 running, 1 pending" in status.stdout, status.stdout

    ray_dir = ray_tmpdir()
    try:
        second = run_farm("sweep", "--config", str(study), "--grid", "g", "--resume", sweep_id, cwd=tmp_path,
                          env={"RAY_TMPDIR": str(ray_dir)})
        # a trial was left: Ray started (its session in RAY_TMPDIR), unlike a resume with nothing left
        # (tests/unit/run/test_resume_nothing_left.py)
        assert any(ray_dir.iterdir()), "no Ray session in RAY_TMPDIR"
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resumed: 1 trial(s) already finished were not run again" in second.stdout
    assert "not run yet" not in second.stdout
    status = run_farm("status", sweep_id, cwd=tmp_path)
    assert "finished" in status.stdout and "2 done, 0 failed, 0 running, 0 pending" in status.stdout, status.stdout
