"""The dry run says why a number is missing (issue 51 item 7): for a GPU trial farm cannot size,
its memory line says "not predicted", why (a hub id with no config.json here, farm looks nothing
up; the GPU model from the cluster; a GPU whose memory farm does not know; a local directory
without config.json) and what goes with it (the fit, the KV-cache tokens, the state blocks); the
grid's cost in dollars is given at a price, and is "not predicted" with why without one. A trial
that holds no GPU has nothing to size and says nothing. Through the `farm` command itself."""

from __future__ import annotations

import pytest

from conftest import run_farm

HUB = "Qwen/Qwen3.5-35B-A3B"
STUDY = """\
name: unsized
primary_profile: p
accelerator_type: {gpu}
models:
  m: {{name: {model}, tokenizer: "farm:tiny"}}
  tiny: {{name: farm-tiny, tokenizer: "farm:tiny"}}
engines:
  vllm: {{}}
  sglang: {{}}
  mock: {{}}
profiles:
  p:
    data: {{kind: synthetic, prompt_tokens: 8, output_tokens: 4}}
    requests: 4
    max_seconds: 60
grids:
  g:
    blocks:
      - {{engine: vllm, models: [m]}}
      - {{engine: sglang, models: [m]}}
      - {{engine: mock, models: [tiny]}}
"""
SO = "; so no fit, KV-cache tokens or state blocks"
NO_PRICE = "cost: not predicted: no price per GPU-hour for {gpu} (the study key `prices: {{{gpu}: USD}}` or `--price {gpu}=USD`)"
AUTO = "the GPU model comes from the cluster when the sweep starts"

CASES = [
    # a hub id: nothing here to size it by, and no network to fetch its config.json
    ("hub-id", "H200", HUB, [], f"memory: not predicted: no config.json for {HUB} here (a hub id; no network){SO}",
     NO_PRICE.format(gpu="H200")),
    # priced: the dollars are predicted, the memory still is not, and says why
    ("hub-id-priced", "H100", HUB, ["--price", "H100=2.5"],
     f"memory: not predicted: no config.json for {HUB} here (a hub id; no network){SO}",
     "cost: ~0.2 GPU-hours of H100 at $2.5 per GPU-hour: ~$0."),
    ("gpu-from-the-cluster", "auto", HUB, ["--price", "H200=3.5"], f"memory: not predicted: accelerator_type auto: {AUTO}{SO}",
     "cost: not predicted: accelerator_type auto: the GPU model, and so its price, comes from the cluster when the sweep "
     "starts"),
    ("unknown-gpu", "B300", HUB, [], f"memory: not predicted: farm does not know the memory of a B300 (it knows H200, "
     f"H100, A100, L40S){SO}", NO_PRICE.format(gpu="B300")),
    ("local-directory-without-config", "H200", "./weights", [], "memory: not predicted: no config.json in ",
     NO_PRICE.format(gpu="H200")),
]


@pytest.mark.parametrize("gpu,model,options,memory,cost", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_missing_prediction_is_named_with_why(tmp_path, gpu, model, options, memory, cost):
    (tmp_path / "weights").mkdir()  # a local model directory without its config.json
    (tmp_path / "s.yaml").write_text(STUDY.format(gpu=gpu, model=model))
    proc = run_farm("sweep", "--config", "s.yaml", "--grid", "g", "--dry-run", *options, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line.strip() for line in proc.stdout.splitlines()]
    mem = [line for line in lines if line.startswith("memory:")]
    assert len(mem) == 2, proc.stdout  # the vLLM and the SGLang trial; the mock one holds no GPU
    assert all(line.startswith(memory) and line.endswith(SO) for line in mem), mem
    (priced,) = [line for line in lines if line.startswith("cost:")]
    assert priced.startswith(cost), priced


def test_a_grid_without_gpus_predicts_nothing_and_says_nothing_missing(tmp_path):
    study = STUDY.format(gpu="H200", model=HUB).split("grids:")[0] + (
        "grids:\n  g:\n    blocks:\n      - {engine: mock, models: [tiny]}\n")
    (tmp_path / "s.yaml").write_text(study)
    proc = run_farm("sweep", "--config", "s.yaml", "--grid", "g", "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "not predicted" not in proc.stdout and "memory:" not in proc.stdout and "\ncost:" not in proc.stdout


def test_the_json_dry_run_says_the_same_with_structure(tmp_path):
    """`--dry-run --json`: each trial's `memory` is what is predicted, or `not_predicted` with the
    same why; `cost` per GPU model its dollars, or `not_predicted` with why; null memory for a
    trial that holds no GPU."""
    import json

    (tmp_path / "s.yaml").write_text(STUDY.format(gpu="H200", model=HUB))
    proc = run_farm("sweep", "--config", "s.yaml", "--grid", "g", "--dry-run", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    memory = {t["engine"]: t["memory"] for t in data["trials"]}
    why = f"no config.json for {HUB} here (a hub id; no network)"
    assert memory == {"vllm": {"not_predicted": why}, "sglang": {"not_predicted": why}, "mock": None}
    assert data["cost"] == [{"gpu": "H200", "not_predicted": NO_PRICE.format(gpu="H200").removeprefix(
        "cost: not predicted: ")}]
    proc = run_farm("sweep", "--config", "s.yaml", "--grid", "g", "--dry-run", "--json", "--price", "H200=3.5",
                    cwd=tmp_path)
    (priced,) = json.loads(proc.stdout)["cost"]
    assert priced["gpu"] == "H200" and priced["usd_per_gpu_hour"] == 3.5 and priced["gpu_hours"] > 0
    assert priced["usd"] == pytest.approx(priced["gpu_hours"] * 3.5)
