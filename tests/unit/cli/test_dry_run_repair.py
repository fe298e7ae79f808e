"""The seed's command on an H100, said before any GPU time (issue 46): `farm sweep --strategy local
--from CMD --dry-run` on the study of the lent GPUs, with the real model shape. vLLM refused this
command on the H100 after a 239 s start ("max_num_seqs (2048) exceeds available Mamba cache blocks
(1515)"); farm now says so in one line before starting anything, and names the repair it searches
from. On the H200 the same command starts (it ran there), and nothing is repaired."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import run_farm
from sweeptools import shape_config

REPO = Path(__file__).resolve().parents[3]
COMMAND = (REPO / "bench/h200/engine-logs/vllm-0.20.2-fp8-prefix-throughput-dummy-pass2-fresh-machine-start.command.txt")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("repair-dry-run")
    model = tmp / "models" / "qwen3.5-35b-a3b-shape"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(shape_config()))
    data = yaml.safe_load((REPO / "configs" / "h200-dummy.yaml").read_text())
    data["models"]["bf16"]["name"] = str(model)
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    # the seed's command as the H200 ran it, serving this model
    command = COMMAND.read_text().split()
    command[command.index("serve") + 1] = str(model)
    return tmp, path, " ".join(command)


def _dry_run(study, gpu):
    tmp, path, command = study
    out = run_farm("sweep", "--dry-run", "--config", str(path), "--grid", "full", "--strategy", "local",
                   "--from", command, "--accelerator", gpu, cwd=tmp)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_on_the_h100_the_seeds_command_is_said_not_to_start_before_any_gpu_time(study):
    out = _dry_run(study, "H100")
    (line,) = [x for x in out.splitlines() if x.strip().startswith("your command")]
    assert line.strip().startswith("your command does not start on H100 (predicted before any start): "
                                   "2,048 requests at once (max_num_seqs) exceed the ~1,509 state blocks")
    assert line.rstrip().endswith("farm's repair: max_running_requests = 1,463")
    # the search starts from the repair, which asks vLLM for no more than that
    step = next(x for x in out.splitlines() if x.strip().startswith("step 1 races"))
    assert "(repaired: max_running_requests=1463)" in step


def test_on_the_h200_the_same_command_starts_and_nothing_of_it_is_repaired(study):
    out = _dry_run(study, "H200")
    assert "your command does not start" not in out
    step = next(x for x in out.splitlines() if x.strip().startswith("step 1 races"))
    assert "repaired" not in step.split(" against ")[0]


def test_a_study_that_asks_for_no_repair_stops_at_the_command_that_does_not_start(study):
    tmp, path, command = study
    data = yaml.safe_load(path.read_text())
    data["repair_start"] = False
    strict = tmp / "strict.yaml"
    strict.write_text(yaml.safe_dump(data, sort_keys=False))
    out = run_farm("sweep", "--dry-run", "--config", str(strict), "--grid", "full", "--strategy", "local",
                   "--from", command, "--accelerator", "H100", cwd=tmp)
    assert out.returncode == 0, out.stderr
    assert "your command does not start on H100" in out.stdout
    assert "the study asks for no repair (repair_start: false), so the search stops here" in out.stdout
    assert "step 1 races" not in out.stdout
    bad = tmp / "bad.yaml"
    bad.write_text(yaml.safe_dump({**data, "repair_start": "sometimes"}, sort_keys=False))
    refused = run_farm("sweep", "--dry-run", "--config", str(bad), "--grid", "full", cwd=tmp)
    assert refused.returncode == 2 and "repair_start" in refused.stderr and "Traceback" not in refused.stderr
