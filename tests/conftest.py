"""Shared test setup: real parts (Ray, MLflow, guidellm, engine processes), kept small for 2 cores."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SEED_FILE = FIXTURES / "seed-results.json"  # a copy of shared/reference/seed-results.json
# The project's shared folder sits beside the repository (../shared): the reference files that
# tests/fixtures holds copies of.
SHARED = REPO.parent / "shared"

# guidellm spawns 10 workers per client by default; 2 are enough for the tests' request rates.
os.environ.setdefault("GUIDELLM__MAX_WORKER_PROCESSES", "2")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

# The Ctrl-C tests (resume, halving) send SIGINT to a `farm sweep` they started. A test run started
# in the background of a non-interactive shell (`bash .ci/run &`) inherits SIGINT ignored, every
# child with it, and Python then never raises KeyboardInterrupt: give the children the default back.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True).returncode == 0


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def shared_file(relative: str) -> Path:
    """A file of ../shared (beside the repository). Where it is missing the test skips on a
    developer's machine and fails in CI (`CI` set), where ../shared must be checked out."""
    path = SHARED / relative
    if not path.exists():
        why = f"{path} is missing (../shared beside the repository)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return path


def run_farm(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """The `farm` command as a user runs it, from this interpreter's environment."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "farm.cli", *args], cwd=cwd or REPO, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def farm_cli():
    return run_farm


@pytest.fixture(scope="session")
def study():
    """The default study (configs/qwen3.5-35b-a3b-h200.yaml)."""
    from farm.study.load import load_study

    return load_study()


@pytest.fixture(scope="session")
def seed_data() -> dict:
    import json

    return json.loads(SEED_FILE.read_text())
