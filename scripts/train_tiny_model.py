#!/usr/bin/env python
"""Train the tiny Qwen3-MoE that has answers: the model farm's quality gate checks on a CPU.

    python scripts/train_tiny_model.py [DIR] [--steps N] [--seed N] [--eval-items N] [--threads N]

Random weights answer nothing, so a gate that compares a configuration's answers with its
baseline's needs a model that has learned something. This trains one, on the CPU, in minutes:
the tiny Qwen3-MoE shape the CPU build of vLLM already serves (hidden 128, 2 layers, 8 experts,
top 2, head_dim 32), with a byte-level tokenizer of 256 bytes and one special token, on a
synthetic task whose answers are exact:

    addition   "47+85="     -> "132"     two numbers of 0 to 99
    reversal   "rev:kqzd="  -> "dzqk"    3 to 7 lowercase letters

Each answer ends with <|endoftext|> (the EOS). Completions, not chat: the prompt is sent as is.

DIR (default models/tiny-answers) receives config.json, generation_config.json, the tokenizer,
model.safetensors (float32), the held-out evaluation set eval.jsonl ({"id","prompt","answer"},
never trained on) and manifest.json: each file's sha256, the command that remakes them, the
versions that made them and the held-out greedy accuracy the trainer measured.

Deterministic: fixed seeds, torch.use_deterministic_algorithms, a fixed thread count (1 unless
--threads), and data drawn from seeded generators; the same command on the same torch and CPU
gives byte-identical files. (Another CPU or torch version may round differently: the committed
manifest is the reference, and a remade model is checked by its accuracy, not its bytes.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import platform
import random
import shlex
import string
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DIR = REPO / "models" / "tiny-answers"
MANIFEST = "manifest.json"
EVAL_FILE = "eval.jsonl"
WRITTEN = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
           "tokenizer_config.json", "special_tokens_map.json", EVAL_FILE, MANIFEST)

EOS = "<|endoftext|>"
MAX_NUMBER = 99
REVERSE_LETTERS = (3, 7)

# The tiny Qwen3-MoE shape of scripts/make-tiny-model.py, with a vocabulary of bytes.
ARCH = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "moe_intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "max_position_embeddings": 256,
}


# --- the task --------------------------------------------------------------------------------


def addition(rng: random.Random) -> tuple[str, str]:
    a, b = rng.randint(0, MAX_NUMBER), rng.randint(0, MAX_NUMBER)
    return f"{a}+{b}=", str(a + b)


def reversal(rng: random.Random) -> tuple[str, str]:
    word = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(*REVERSE_LETTERS)))
    return f"rev:{word}=", word[::-1]


TASKS = (addition, reversal)
TRAIN_WEIGHTS = (2, 1)  # addition is the slower to learn: two training items of it for one reversal


def eval_items(n: int, seed: int) -> list[dict]:
    """The held-out set: half addition, half reversal, distinct prompts, in a fixed order."""
    rng = random.Random(f"eval-{seed}")
    items: list[dict] = []
    seen: set[str] = set()
    while len(items) < n:
        task = TASKS[len(items) % len(TASKS)]
        prompt, answer = task(rng)
        if prompt in seen:
            continue
        seen.add(prompt)
        items.append({"id": f"{task.__name__}-{len(items):04d}", "prompt": prompt, "answer": answer})
    return items


# --- the tokenizer ---------------------------------------------------------------------------


def build_tokenizer(directory: Path):
    """A byte-level BPE with no merges: one token per byte (256), then <|endoftext|> (id 256).

    Every text encodes (bytes), every id decodes, and vLLM's incremental detokenizer reads it as
    it reads GPT-2's. No training, so nothing about it depends on a corpus.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet(), key=lambda c: _byte_of(c))
    vocab = {symbol: i for i, symbol in enumerate(alphabet)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([EOS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=EOS, bos_token=None)
    fast.save_pretrained(str(directory))
    return fast


def _byte_of(symbol: str) -> int:
    """The byte a ByteLevel symbol stands for (GPT-2's bytes_to_unicode, inverted)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    code = ord(symbol)
    if code in printable:
        return code
    others = [b for b in range(256) if b not in printable]
    return others[code - 256]


# --- training --------------------------------------------------------------------------------


def batch(rng: random.Random, size: int, eos: int, held_out: set[str], torch):
    """`size` training sequences (prompt + answer + EOS, right-padded); loss on answer and EOS only."""
    rows, labels = [], []
    while len(rows) < size:
        prompt, answer = rng.choices(TASKS, weights=TRAIN_WEIGHTS)[0](rng)
        if prompt in held_out:
            continue
        p, a = list(prompt.encode()), list(answer.encode()) + [eos]
        rows.append(p + a)
        labels.append([-100] * len(p) + a)
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [eos] * (width - len(r)) for r in rows])
    lab = torch.tensor([r + [-100] * (width - len(r)) for r in labels])
    return ids, lab


def greedy_answers(model, prompts: list[str], eos: int, torch, max_new: int = 8) -> list[str]:
    """Greedy completions, batched by prompt length (no padding, so no position bookkeeping)."""
    out: dict[str, str] = {}
    by_len: dict[int, list[str]] = {}
    for p in prompts:
        by_len.setdefault(len(p.encode()), []).append(p)
    with torch.no_grad():
        for group in by_len.values():
            ids = torch.tensor([list(p.encode()) for p in group])
            done = torch.zeros(len(group), dtype=torch.bool)
            new: list[list[int]] = [[] for _ in group]
            for _ in range(max_new):
                nxt = model(input_ids=ids).logits[:, -1].argmax(-1)
                for i, t in enumerate(nxt.tolist()):
                    if not done[i]:
                        if t == eos:
                            done[i] = True
                        else:
                            new[i].append(t)
                if bool(done.all()):
                    break
                ids = torch.cat([ids, nxt[:, None]], dim=1)
            for p, toks in zip(group, new):
                out[p] = bytes(t for t in toks if t < 256).decode(errors="replace")
    return [out[p] for p in prompts]


def accuracy(model, items: list[dict], eos: int, torch) -> dict:
    got = greedy_answers(model, [it["prompt"] for it in items], eos, torch)
    per_task: dict[str, list[bool]] = {}
    for it, answer in zip(items, got):
        per_task.setdefault(it["id"].rsplit("-", 1)[0], []).append(answer == it["answer"])
    allright = [x for xs in per_task.values() for x in xs]
    return {"exact_match": round(sum(allright) / len(allright), 4), "items": len(allright),
            **{task: round(sum(xs) / len(xs), 4) for task, xs in sorted(per_task.items())}}


def train(directory: Path, steps: int, seed: int, n_eval: int, batch_size: int, lr: float) -> dict:
    import torch
    from transformers import GenerationConfig, Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)

    items = eval_items(n_eval, seed)
    held_out = {it["prompt"] for it in items}
    tokenizer = build_tokenizer(directory)
    eos = tokenizer.convert_tokens_to_ids(EOS)
    assert len(tokenizer) == 257 and eos == 256, (len(tokenizer), eos)

    config = Qwen3MoeConfig(
        **ARCH,
        vocab_size=len(tokenizer),
        decoder_sparse_step=1,
        norm_topk_prob=True,
        output_router_logits=True,        # the router's load-balancing loss keeps every expert in use
        router_aux_loss_coef=0.01,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=eos,
        pad_token_id=eos,
        dtype="float32",
    )
    config.architectures = ["Qwen3MoeForCausalLM"]
    model = Qwen3MoeForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    warmup = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    rng = random.Random(f"train-{seed}")
    start = time.monotonic()
    model.train()
    for step in range(steps):
        ids, labels = batch(rng, batch_size, eos, held_out, torch)
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 250 == 0 or step == steps - 1:
            print(f"train_tiny_model: step {step + 1}/{steps} loss {loss.item():.4f} "
                  f"({time.monotonic() - start:.0f} s)", flush=True)
    model.eval()
    scores = accuracy(model, items, eos, torch)
    print(f"train_tiny_model: held-out greedy exact match {scores}", flush=True)

    model.config.output_router_logits = False  # a served model returns no router logits
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=eos, do_sample=False)
    model.save_pretrained(str(directory))
    with open(directory / EVAL_FILE, "w") as f:
        for it in items:
            f.write(json.dumps(it) + "\n")
    return {"accuracy": scores, "train_seconds": round(time.monotonic() - start)}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR,
                        help=f"where to save the model (default {DEFAULT_DIR.relative_to(REPO)})")
    parser.add_argument("--steps", type=int, default=2000, help="optimizer steps (default 2000)")
    parser.add_argument("--batch-size", type=int, default=64, help="sequences per step (default 64)")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (default 3e-3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights, the data and the held-out set")
    parser.add_argument("--eval-items", type=int, default=400, help="held-out items in eval.jsonl (default 400)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1; part of the result)")
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])

    import torch
    import transformers

    torch.set_num_threads(args.threads)
    directory: Path = args.directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    for name in WRITTEN:  # what an earlier run wrote; anything else (a README) stays
        (directory / name).unlink(missing_ok=True)
    result = train(directory, args.steps, args.seed, args.eval_items, args.batch_size, args.lr)

    shown = str(args.directory) if not args.directory.is_absolute() else str(directory)
    options = [f"--steps {args.steps}", f"--batch-size {args.batch_size}", f"--lr {args.lr}",
               f"--seed {args.seed}", f"--eval-items {args.eval_items}", f"--threads {args.threads}"]
    manifest = {
        "command": f"python scripts/train_tiny_model.py {shlex.quote(shown)} " + " ".join(options),
        "architecture": "Qwen3MoeForCausalLM",
        **ARCH,
        "vocab_size": 257,
        "task": {"addition": f"a+b=, a and b in 0..{MAX_NUMBER}",
                 "reversal": f"rev:WORD=, {REVERSE_LETTERS[0]} to {REVERSE_LETTERS[1]} lowercase letters"},
        "held_out_greedy": result["accuracy"],
        "made_with": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "python": platform.python_version(), "machine": platform.machine()},
        "files": {name: sha256(directory / name) for name in WRITTEN if name != MANIFEST
                  and (directory / name).is_file()},
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    size = sum(p.stat().st_size for p in directory.iterdir()) / 1e6
    print(f"train_tiny_model: wrote {directory} ({size:.1f} MB) in {result['train_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
