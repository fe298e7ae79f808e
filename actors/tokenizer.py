"""A tiny tokenizer farm makes locally, so synthetic prompts need no model hub.

guidellm sizes synthetic prompts with a Hugging Face tokenizer. On a cluster that is the served
model's own; on a laptop or in CI there is no hub, so `farm:tiny` names a byte-level BPE that is
trained here, deterministically, the first time it is needed, and cached.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

TINY = "farm:tiny"
VOCAB_SIZE = 1024

_WORDS = (
    "the model serves tokens across nodes while the scheduler batches requests and the cache keeps "
    "prefixes warm so throughput rises until memory runs out then latency grows and the benchmark "
    "records every request with its time to first token and inter token latency for each profile"
).split()


def cache_dir() -> Path:
    root = os.environ.get("FARM_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "farm")
    return Path(root)


def _corpus(lines: int = 2000, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 30))) for _ in range(lines)]


def build_tiny_tokenizer(directory: Path, corpus: list[str] | None = None) -> Path:
    """Train and save the tiny tokenizer (with a ChatML chat template) into `directory`.

    `corpus` replaces the default training text: the default's few words give far fewer than
    `VOCAB_SIZE` tokens, while a model whose tokenizer must fill its whole vocabulary (so every
    id it can generate decodes) needs more varied text.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # heavy: only to build it once
    from transformers import PreTrainedTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus if corpus is not None else _corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    fast.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    fast.save_pretrained(str(directory))
    (directory / "farm-tokenizer.json").write_text(json.dumps({"vocab_size": VOCAB_SIZE, "seed": 0}))
    return directory


def resolve_tokenizer(name: str | None, model: str) -> str:
    """The tokenizer guidellm should load: `farm:tiny` is built on first use; else as given."""
    name = name or model
    if name != TINY:
        return name
    directory = cache_dir() / "tiny-tokenizer"
    if not (directory / "farm-tokenizer.json").is_file():
        tmp = directory.with_name(f"tiny-tokenizer.{os.getpid()}.tmp")
        build_tiny_tokenizer(tmp)
        try:
            tmp.rename(directory)
        except OSError:  # another process built it first
            shutil.rmtree(tmp, ignore_errors=True)
    return str(directory)
