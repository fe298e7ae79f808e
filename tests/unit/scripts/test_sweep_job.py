"""scripts/h200/sweep-job.sh, the sweep session on a lent GPU machine, run by bash with the real farm
(the machine's `$B/src` is this checkout): it takes any study (FARM_STUDY) and GPU model
(FARM_ACCELERATOR -> --accelerator), and a first sweep that starts none ends the job with one
line, instead of resuming and reporting an empty sweep id."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

SCRIPT = REPO / "scripts/h200/sweep-job.sh"


def _machine(tmp: Path) -> Path:
    """The machine's folder as device.sh leaves it: the project under src/, an empty store."""
    b = tmp / "b"
    (b / "src").mkdir(parents=True)
    (b / "store").mkdir()
    for name in ("farm", "actors", "configs", "scripts"):
        (b / "src" / name).symlink_to(REPO / name)
    return b


def _job(b: Path, **env: str) -> subprocess.CompletedProcess:
    # python3 is this venv's (farm and its dependencies), as the node's own Python is on the machine
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FARM_", "RAY_", "MLFLOW_"))}
    return subprocess.run(["bash", str(SCRIPT), str(b)], env={**clean, "PATH": path, **env}, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("env, error", [
    ({"FARM_ACCELERATOR": "H 200"},
     "error: --accelerator: expected a GPU model as Ray names it (e.g. H200, A100, RTX-PRO-6000) or auto, got 'H 200'"),
    ({"FARM_STUDY": "configs/no-such-study.yaml"}, "error: {b}/src/configs/no-such-study.yaml: file not found"),
])
def test_a_first_sweep_that_starts_none_ends_the_job_with_one_line(tmp_path, env, error):
    b = _machine(tmp_path)
    done = _job(b, **env)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip() and not line.startswith("nvidia")]
    # farm's own line, then the job's: no resume of an empty sweep id, no report of one
    assert lines == [error.format(b=b), "sweep job ended: the first sweep started none (exit 2)"], lines
    assert done.returncode == 2
    assert not (b / "store" / "sweep-id").exists() and not (b / "store" / "report.md").exists()
