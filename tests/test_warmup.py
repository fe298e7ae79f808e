"""Model warm-up runs the engine's own download command once per node and model, in a real process."""

from __future__ import annotations

import os
import stat

from farm.engines import get_engine
from farm.spec import EngineSpec
from farm.warmup import warm


def _fake_venv(tmp_path, exit_code: int = 0):
    """A venv whose python records each call (the real one would download from the hub)."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    log = tmp_path / "calls.txt"
    script = bin_dir / "python"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\necho 'no network here' >&2\nexit {exit_code}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return tmp_path / "venv", log


def test_warmup_downloads_once_per_node_and_model(tmp_path):
    venv, log = _fake_venv(tmp_path)
    spec = EngineSpec(venv=str(venv), download_dir="/models")
    engine = get_engine("vllm")
    for _ in range(2):
        assert warm(engine, spec, "Qwen/Qwen3.5-35B-A3B", dict(os.environ), tmp_path / "warm", 30) is None
    calls = log.read_text().splitlines()
    assert len(calls) == 1
    assert "snapshot_download" in calls[0] and "Qwen/Qwen3.5-35B-A3B" in calls[0] and "/models" in calls[0]
    assert warm(engine, spec, "Qwen/Qwen3.5-35B-A3B-FP8", dict(os.environ), tmp_path / "warm", 30) is None
    assert len(log.read_text().splitlines()) == 2


def test_a_failed_warmup_is_reported_not_raised_and_tried_again(tmp_path):
    venv, log = _fake_venv(tmp_path, exit_code=3)
    spec = EngineSpec(venv=str(venv))
    problem = warm(get_engine("sglang"), spec, "Qwen/Qwen3.5-35B-A3B", dict(os.environ), tmp_path / "warm", 30)
    assert problem == "model warm-up exited with 3: no network here"
    warm(get_engine("sglang"), spec, "Qwen/Qwen3.5-35B-A3B", dict(os.environ), tmp_path / "warm", 30)
    assert len(log.read_text().splitlines()) == 2  # no marker after a failure


def test_local_models_and_the_mock_need_no_warmup(tmp_path):
    venv, log = _fake_venv(tmp_path)
    assert warm(get_engine("vllm"), EngineSpec(venv=str(venv)), "/data/models/tiny", dict(os.environ), tmp_path, 30) is None
    assert warm(get_engine("mock"), EngineSpec(), "farm-tiny", dict(os.environ), tmp_path, 30) is None
    assert not log.exists()
