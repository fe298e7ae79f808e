"""scripts/train_tiny_model.py: the tiny Qwen3-MoE that has answers, for the quality gate on a CPU.

The trainer runs as a user runs it (subprocesses of this interpreter), at a few steps: what the
tests check is that it is deterministic and writes a model transformers loads, not that a few
steps learn anything. The committed model (models/tiny-answers) is checked against its manifest
and, in a slow test, by its answers.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "train_tiny_model.py"
MODEL = REPO / "models" / "tiny-answers"
WRITTEN = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
           "tokenizer_config.json", "eval.jsonl", "manifest.json"}


def trainer():
    spec = importlib.util.spec_from_file_location("train_tiny_model", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[Path, Path]:
    """Two runs of a reduced trainer, side by side (each is mostly torch's import)."""
    root = tmp_path_factory.mktemp("tiny-answers")
    dirs = (root / "a", root / "b")
    procs = [subprocess.Popen([sys.executable, str(SCRIPT), str(d), "--steps", "4", "--batch-size", "8",
                               "--eval-items", "12"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for d in dirs]
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
        assert "wrote" in out
    return dirs


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_two_runs_write_byte_identical_files(two_runs):
    a, b = two_runs
    names = {p.name for p in a.iterdir()}
    assert names == {p.name for p in b.iterdir()} >= WRITTEN - {"special_tokens_map.json"}
    for name in sorted(names - {"manifest.json"}):  # the manifest names its own directory
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    ma, mb = (json.loads((d / "manifest.json").read_text()) for d in two_runs)
    assert ma["files"] == mb["files"]
    assert ma["command"].replace(str(a), "DIR") == mb["command"].replace(str(b), "DIR")


def test_the_reduced_model_loads_in_transformers_with_its_tokenizer(two_runs):
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(str(two_runs[0]))
    assert config.architectures == ["Qwen3MoeForCausalLM"] and config.vocab_size == 257
    tok = AutoTokenizer.from_pretrained(str(two_runs[0]))
    text = "47+85= rev:kqzd= é"
    assert tok.encode(text) == list(text.encode()), "one token per byte: the trainer feeds raw bytes"
    assert tok.decode(tok.encode(text)) == text
    assert tok.eos_token_id == config.eos_token_id == 256


@pytest.mark.skipif(not MODEL.is_dir(), reason="models/tiny-answers is not in this checkout")
def test_the_committed_files_match_their_manifest():
    manifest = json.loads((MODEL / "manifest.json").read_text())
    assert set(manifest["files"]) == WRITTEN - {"manifest.json"}
    for name, digest in manifest["files"].items():
        assert sha256(MODEL / name) == digest, f"{name} differs from manifest.json: remake it with {manifest['command']}"
    assert manifest["command"].startswith("python scripts/train_tiny_model.py models/tiny-answers ")
    assert manifest["held_out_greedy"]["exact_match"] >= 0.95
    assert sum(p.stat().st_size for p in MODEL.iterdir()) < 5e6


@pytest.mark.skipif(not MODEL.is_dir(), reason="models/tiny-answers is not in this checkout")
def test_the_evaluation_set_is_exact_and_held_out():
    items = [json.loads(line) for line in (MODEL / "eval.jsonl").read_text().splitlines()]
    assert len(items) == 400 and all(set(it) == {"id", "prompt", "answer"} for it in items)
    assert len({it["id"] for it in items}) == len({it["prompt"] for it in items}) == 400
    for it in items:
        if it["id"].startswith("addition-"):
            a, b = it["prompt"].removesuffix("=").split("+")
            assert it["answer"] == str(int(a) + int(b))
        else:
            assert it["id"].startswith("reversal-")
            assert it["answer"] == it["prompt"].removeprefix("rev:").removesuffix("=")[::-1]
    # the file is the trainer's own held-out set, so every training batch skipped these prompts
    assert items == trainer().eval_items(400, seed=0)


@pytest.mark.slow
@pytest.mark.skipif(not MODEL.is_dir(), reason="models/tiny-answers is not in this checkout")
def test_the_committed_model_answers_at_greedy_decoding():
    import torch
    from transformers import AutoModelForCausalLM

    module = trainer()
    items = [json.loads(line) for line in (MODEL / "eval.jsonl").read_text().splitlines()][::4]
    model = AutoModelForCausalLM.from_pretrained(str(MODEL), dtype=torch.float32).eval()
    scores = module.accuracy(model, items, eos=256, torch=torch)
    assert scores["items"] == 100
    assert scores["exact_match"] >= 0.95, scores
