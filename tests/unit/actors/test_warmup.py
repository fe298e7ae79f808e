"""Model warm-up runs the engine's own download command (huggingface_hub's snapshot_download, in a
real interpreter: farm's own environment, which has huggingface_hub like an engine's) once per node
and model. No hub is reachable here, so the hub is offline (HF_HUB_OFFLINE=1) and a model counts as
"downloaded" when the study's download dir holds its snapshot, laid out as the hub's cache does."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from farm.engines import get_engine
from farm.study.spec import EngineSpec
from actors.warmup import warm

MODEL = "Qwen/Qwen3.5-35B-A3B"
FP8 = "Qwen/Qwen3.5-35B-A3B-FP8"


def _cached(download_dir: Path, repo: str) -> Path:
    """`repo` as huggingface_hub keeps it in a cache dir (refs/main -> snapshots/<revision>)."""
    root = download_dir / ("models--" + repo.replace("/", "--"))
    revision = "0123456789abcdef0123456789abcdef01234567"
    (root / "snapshots" / revision).mkdir(parents=True)
    (root / "snapshots" / revision / "config.json").write_text("{}\n")
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(revision)
    return root


def _offline() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1"}


def _spec(tmp_path: Path) -> EngineSpec:
    return EngineSpec(venv=sys.prefix, download_dir=str(tmp_path / "models"))


def test_warmup_runs_once_per_node_and_model(tmp_path):
    spec, markers = _spec(tmp_path), tmp_path / "warm"
    engine = get_engine("vllm")
    cached = _cached(tmp_path / "models", MODEL)
    assert warm(engine, spec, MODEL, _offline(), markers, 120) is None
    # Done on this node: the second time nothing runs (it would fail now, the snapshot is gone).
    shutil.rmtree(cached)
    assert warm(engine, spec, MODEL, _offline(), markers, 120) is None
    # Another model is its own warm-up: not there, and the hub is out of reach.
    problem = warm(engine, spec, FP8, _offline(), markers, 120)
    assert problem.startswith("model warm-up exited with 1: ") and "LocalEntryNotFoundError" in problem


def test_a_failed_warmup_is_reported_not_raised_and_tried_again(tmp_path):
    spec, markers = _spec(tmp_path), tmp_path / "warm"
    engine = get_engine("sglang")
    assert "LocalEntryNotFoundError" in warm(engine, spec, MODEL, _offline(), markers, 120)
    # no marker after a failure: once the model is there, the next trial's warm-up runs and succeeds
    _cached(tmp_path / "models", MODEL)
    assert warm(engine, spec, MODEL, _offline(), markers, 120) is None
    assert len(list(markers.iterdir())) == 1


def test_local_models_and_the_mock_need_no_warmup(tmp_path):
    # an interpreter that does not exist: had anything been started, warm() would report it
    spec = EngineSpec(venv=str(tmp_path / "no-such-venv"))
    assert warm(get_engine("vllm"), spec, "/data/models/tiny", _offline(), tmp_path / "warm", 30) is None
    assert warm(get_engine("mock"), spec, "farm-tiny", _offline(), tmp_path / "warm", 30) is None
    assert warm(get_engine("vllm"), spec, MODEL, _offline(), tmp_path / "warm", 30).startswith("model warm-up failed")
    assert not (tmp_path / "warm").exists()
