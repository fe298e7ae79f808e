#!/usr/bin/env python
"""Generate the tiny random-weight Qwen3-MoE that the CPU build of vLLM serves in CI.

    python scripts/make-tiny-model.py [DIR] [--force] [--seed N]

No model hub: a Qwen3MoeForCausalLM (hidden 128, 2 layers, 8 experts, top 2, vocab 1024) with
seeded random weights, and farm's byte-level BPE tokenizer (ChatML chat template) trained on
generated text large enough to fill the whole vocabulary, so every id the model can generate
decodes to text. Saved with `save_pretrained` (about 2 MB). Runs in farm's own venv.

Deterministic: the same seed gives the same files. Idempotent: a directory that already holds a
model made with the same parameters is left alone (`--force` rebuilds it).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script from a clone, before or without `pip install -e .`
sys.path.insert(0, str(REPO / "scripts"))

from actors.tokenizer import VOCAB_SIZE, _corpus, build_tiny_tokenizer  # noqa: E402
from modeldir import build_beside  # noqa: E402

DEFAULT_DIR = REPO / ".models" / "tiny-qwen3-moe"
MARKER = "farm-model.json"

# Shapes of the model. head_dim 32 = hidden / heads; vLLM's CPU attention supports it.
ARCH = {
    "vocab_size": VOCAB_SIZE,
    "hidden_size": 128,
    "intermediate_size": 256,
    "moe_intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "max_position_embeddings": 2048,
}


def corpus(seed: int) -> list[str]:
    """Training text for the tokenizer: farm's default sentences plus seeded pseudo-words.

    The default sentences alone give about 430 tokens; varied syllable words give the BPE trainer
    enough distinct merges to reach the full vocabulary.
    """
    rng = random.Random(seed)
    onsets = ["", "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w",
              "st", "tr", "pl", "ch", "sh", "th", "br", "gr"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "ou", "io"]
    codas = ["", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng"]
    words = sorted({
        "".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(rng.randint(1, 4)))
        for _ in range(6000)
    })
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 30))) for _ in range(6000)]
    return _corpus(seed=seed) + lines


def build(directory: Path, seed: int) -> None:
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen3MoeConfig, Qwen3MoeForCausalLM

    build_tiny_tokenizer(directory, corpus=corpus(seed))
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    if len(tokenizer) != VOCAB_SIZE:
        raise SystemExit(f"the tokenizer has {len(tokenizer)} tokens, expected {VOCAB_SIZE}")
    eos, pad = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])

    config = Qwen3MoeConfig(
        **ARCH,
        decoder_sparse_step=1,
        norm_topk_prob=True,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=eos,
        pad_token_id=pad,
        dtype="bfloat16",
    )
    config.architectures = ["Qwen3MoeForCausalLM"]
    torch.manual_seed(seed)
    model = Qwen3MoeForCausalLM(config).to(torch.bfloat16).eval()
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad)
    model.save_pretrained(str(directory))
    (directory / "farm-tokenizer.json").unlink(missing_ok=True)  # that marker is for farm:tiny's cache


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR,
                        help=f"where to save the model (default {DEFAULT_DIR.relative_to(REPO)})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and the tokenizer's text")
    parser.add_argument("--force", action="store_true", help="rebuild even if the directory holds the model")
    args = parser.parse_args(argv)

    directory: Path = args.directory.resolve()
    want = {"architecture": "Qwen3MoeForCausalLM", **ARCH, "seed": args.seed}
    marker = directory / MARKER
    if not args.force and marker.is_file() and json.loads(marker.read_text()) == want:
        print(f"make-tiny-model: {directory} already holds the model (seed {args.seed}); --force rebuilds it")
        return 0

    def make(tmp: Path) -> dict:
        build(tmp, args.seed)
        return want

    build_beside(directory, make, MARKER, "make-tiny-model")
    return 0


if __name__ == "__main__":
    sys.exit(main())
