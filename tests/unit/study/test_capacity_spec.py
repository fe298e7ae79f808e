"""A capacity profile in the study file: what it needs, and one line (exit 2) for each mistake."""

from __future__ import annotations

import pytest
import yaml

from conftest import run_farm

BASE = {"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8}, "requests": 8}
GOOD = {**BASE, "kind": "capacity", "slo": {"ttft_p95_ms_max": 500},
        "capacity": {"over": "concurrency", "ladder": [1, 2, 4]}}


def _study(tmp_path, profile: dict):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({
        "name": "s", "primary_profile": "c", "models": {"tiny": {"name": "farm-tiny", "tokenizer": "farm:tiny"}},
        "engines": {"mock": {}}, "profiles": {"c": profile},
        "grids": {"g": {"blocks": [{"engine": "mock", "models": ["tiny"], "flags": {"admission-limit": 2}}]}}}))
    return path


def test_a_capacity_profile_expands_and_its_grid_costs_its_run_budget(tmp_path):
    proc = run_farm("sweep", "--config", str(_study(tmp_path, GOOD)), "--grid", "g", "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "g: 1 trials (1 mock), 8 runs" in proc.stdout  # max_runs defaults to 8
    assert "mock_gate.py --limit 2" in proc.stdout


@pytest.mark.parametrize("change, key, reason", [
    ({"slo": None}, "profiles.c", "a capacity profile needs an `slo`"),
    ({"capacity": None}, "profiles.c", "a capacity profile needs `capacity`"),
    ({"kind": "fixed"}, "profiles.c", "set kind: capacity"),
    ({"rate": 10}, "profiles.c", "leave `rate` unset"),
    ({"capacity": {"over": "concurrency", "ladder": [4, 2]}}, "profiles.c.capacity.ladder", "the ladder must rise"),
    ({"capacity": {"over": "concurrency", "ladder": [1.5, 3]}}, "profiles.c.capacity", "whole numbers"),
    ({"capacity": {"over": "users", "ladder": [1]}}, "profiles.c.capacity.over", "concurrency"),
    ({"capacity": {"over": "rate", "ladder": [1], "max_runs": 0}}, "profiles.c.capacity.max_runs", ""),
    ({"capacity": {"over": "rate", "ladder": [1], "steps": 3}}, "profiles.c.capacity.steps", ""),
])
def test_mistakes_are_one_line_naming_file_and_key(tmp_path, change, key, reason):
    profile = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    path = _study(tmp_path, profile)
    proc = run_farm("sweep", "--config", str(path), "--grid", "g", "--dry-run", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: {path}: {key}:") and reason in lines[0], lines[0]
