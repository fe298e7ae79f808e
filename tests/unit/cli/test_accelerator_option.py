"""`farm sweep --accelerator NAME|auto` and a study's `accelerator_type: auto`: what a dry run says
(memory predicted for the GPU named, or a note that the cluster names it), and that the option
travels to a Ray job's command line."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import REPO, run_farm
from shape_config import shape_model_config

NOTE = "note: accelerator_type auto: the GPU model comes from the cluster when the sweep starts"


@pytest.fixture(scope="module")
def h200_dummy(tmp_path_factory) -> Path:
    """configs/h200-dummy.yaml as committed (accelerator_type: auto), beside the shape model's
    config.json where its `../.models/` points, so that memory can be predicted."""
    tmp = tmp_path_factory.mktemp("h200-dummy")
    (tmp / "configs").mkdir()
    shutil.copy(REPO / "configs" / "h200-dummy.yaml", tmp / "configs")
    shutil.copytree(REPO / "configs" / "reference", tmp / "configs" / "reference")
    model = tmp / ".models" / "qwen3.5-35b-a3b-shape"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(shape_model_config()))
    return tmp / "configs" / "h200-dummy.yaml"


def _dry_run(study: Path, *args: str) -> list[str]:
    out = run_farm("sweep", "--dry-run", "--grid", "seed", "--config", str(study), *args, cwd=study.parent)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_the_committed_gpu_study_takes_its_gpu_model_from_the_cluster(h200_dummy):
    lines = _dry_run(h200_dummy)
    notes = [line for line in lines if line.startswith(NOTE)]
    assert len(notes) == 1 and "`--accelerator NAME` (e.g. --accelerator H200) predicts memory for one" in notes[0]
    # no GPU model, no fit: each GPU trial says so (issue 51 item 7)
    memory = [line.strip() for line in lines if line.strip().startswith("memory:")]
    assert memory and all(line.startswith("memory: not predicted: accelerator_type auto: the GPU model comes from the "
                                          "cluster when the sweep starts; so no fit") for line in memory), memory


def test_a_gpu_named_by_the_option_is_the_one_memory_is_predicted_for(h200_dummy):
    fits = {}
    for gpu in ("H200", "H100"):
        lines = _dry_run(h200_dummy, "--accelerator", gpu)
        assert not any(line.startswith(NOTE) for line in lines)
        fits[gpu] = [line.strip() for line in lines if line.strip().startswith("memory:")]
        assert len(fits[gpu]) == 6, lines  # vLLM's six trials of the seed's grid (MTP's included)
    assert all(line.startswith("memory: fits, ~") for line in fits["H200"])
    # the same trials on a GPU of 80 GiB, not 141: less memory to fill, or no fit at all
    usable = {gpu: [re.search(r"of ([0-9.]+) GiB", line) for line in lines] for gpu, lines in fits.items()}
    for h200, h100, line in zip(usable["H200"], usable["H100"], fits["H100"]):
        assert "does not fit" in line or float(h100.group(1)) < float(h200.group(1)) - 40, line


def test_auto_named_as_the_option_is_the_study_left_to_the_cluster(h200_dummy):
    lines = _dry_run(h200_dummy, "--accelerator", "auto")
    assert sum(line.startswith(NOTE) for line in lines) == 1


def test_halving_says_its_pruning_waits_for_the_gpu_model(h200_dummy):
    out = run_farm("sweep", "--dry-run", "--grid", "full", "--strategy", "halving", "--config", str(h200_dummy),
                   cwd=h200_dummy.parent)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert sum(line.startswith(NOTE) for line in lines) == 1
    assert any(line.endswith("; halving prunes the trials that do not fit it then") for line in lines)
    halving = next(line for line in lines if line.startswith("strategy halving"))
    assert "0 trial(s) pruned: does not fit" in halving and "not predicted yet (accelerator_type auto)" in halving
    named = run_farm("sweep", "--dry-run", "--grid", "full", "--strategy", "halving", "--config", str(h200_dummy),
                     "--accelerator", "H100", cwd=h200_dummy.parent)
    assert named.returncode == 0, named.stderr
    assert "accelerator_type auto" not in named.stdout


def test_the_jobs_entrypoint_carries_the_accelerator():
    from farm.cli.main import sweep
    from farm.run.jobs import SweepArgs

    argv = shlex.split(SweepArgs(grid="seed", tracking_uri="http://head:5000", accelerator="H100").entrypoint())
    assert argv[argv.index("--accelerator") + 1] == "H100"
    assert sweep.make_context("sweep", argv[4:]).params["accelerator"] == "H100"  # the head parses it alike
    assert "--accelerator" not in SweepArgs(grid="seed", tracking_uri="http://head:5000").entrypoint()


def test_a_sweep_submitted_as_a_ray_job_hands_it_the_accelerator(monkeypatch, tmp_path):
    from farm.cli.main import cli
    from farm.run import jobs

    handed = {}

    def submit(config, address, **kw):
        handed.update(kw, address=address)
        return 0

    monkeypatch.setattr(jobs, "submit_from_cli", submit)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["sweep", "--config", str(REPO / "configs/h200-dummy.yaml"), "--grid", "seed",
                                      "--address", "http://head:8265", "--tracking-uri", "http://head:5000",
                                      "--accelerator", "H100"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert handed["address"] == "http://head:8265" and handed["accelerator"] == "H100"
