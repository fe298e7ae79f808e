"""Every hint farm prints names an option that exists on the commands it names."""

from __future__ import annotations

import json
import re
import tarfile

import click

from conftest import REPO, run_farm
from farm.cli.main import cli

SOURCES = [p for p in (REPO / "farm").rglob("*.py")]


def _options(command: str) -> set[str]:
    cmd = cli.commands[command]
    return {opt for p in cmd.params if isinstance(p, click.Option) for opt in p.opts}


def test_a_hint_that_names_commands_names_options_they_have():
    # "--baseline (farm sweep, farm report, farm analyze)": each of those takes --baseline
    found = 0
    for path in SOURCES:
        for option, commands in re.findall(r"(--[a-z][a-z-]+) \(((?:farm [a-z]+(?:, )?)+)\)", path.read_text()):
            for command in re.findall(r"farm ([a-z]+)", commands):
                assert option in _options(command), f"{path.name}: {option} is not an option of farm {command}"
                found += 1
    assert found >= 3


def test_report_compares_with_the_baseline_it_is_given(tmp_path):
    with tarfile.open(REPO / "bench/h200/store.tgz") as tar:
        tar.extractall(tmp_path, filter="data")
    proc = run_farm("report", "aa0e8ed837734ac3bb3a11f5178e8f9e", "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
                    "--baseline", "step1_quant_fp8", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["baseline"]["name"] == "step1_quant_fp8"
