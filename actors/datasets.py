"""Benchmark datasets: ShareGPT-format conversations turned into what guidellm reads.

A ShareGPT file is a JSON list of `{"conversations": [{"from": "human", "value": ...},
{"from": "gpt", "value": ...}, ...]}`. Like vLLM's own ShareGPT benchmark, each conversation
gives one request: its first human turn is the prompt, and the token length of the reply that
follows is the number of output tokens to ask for. The result is a JSONL file with the columns
guidellm's column mapper knows (`prompt`, `output_tokens_count`), cached next to the source's
hash so that every run of a sweep reads the same requests.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from farm.errors import UserError
from farm.inputs import DATASET_MAX_BYTES, read_json_file

MIN_TOKENS = 4  # drop degenerate turns, as vLLM's benchmark does
MAX_PROMPT_TOKENS = 1024
MAX_TOTAL_TOKENS = 2048


class DatasetMissing(FileNotFoundError):
    """The dataset a profile names is not on this node."""


def _pairs(conversations: list) -> list[tuple[str, str]]:
    out = []
    for item in conversations:
        turns = item.get("conversations") if isinstance(item, dict) else None
        if not isinstance(turns, list) or len(turns) < 2:
            continue
        first, second = turns[0], turns[1]
        if not (isinstance(first, dict) and isinstance(second, dict)):
            continue
        if first.get("from") != "human" or second.get("from") != "gpt":
            continue
        out.append((str(first.get("value", "")), str(second.get("value", ""))))
    return out


def prepare_sharegpt(path: Path, cache_dir: Path, tokenizer: str, limit: int | None = None) -> Path:
    """The guidellm-ready JSONL for a ShareGPT file (built once per file, tokenizer and limit)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetMissing(str(path))
    digest = hashlib.sha1()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    digest.update(f"{tokenizer}|{limit}".encode())
    out = Path(cache_dir) / f"sharegpt-{digest.hexdigest()[:12]}.jsonl"
    if out.is_file():
        return out
    data = read_json_file(path, what="ShareGPT file", max_bytes=DATASET_MAX_BYTES)  # the boundary: bytes to data
    if not isinstance(data, list):
        raise UserError("a ShareGPT file must be a JSON list of conversations", file=str(path))

    from transformers import AutoTokenizer  # heavy: only when a ShareGPT profile runs

    tok = AutoTokenizer.from_pretrained(tokenizer)
    rows = []
    for prompt, reply in _pairs(data):
        n_prompt = len(tok(prompt).input_ids)
        n_out = len(tok(reply).input_ids)
        if n_prompt < MIN_TOKENS or n_out < MIN_TOKENS:
            continue
        if n_prompt > MAX_PROMPT_TOKENS or n_prompt + n_out > MAX_TOTAL_TOKENS:
            continue
        rows.append({"prompt": prompt, "output_tokens_count": n_out, "prompt_tokens_count": n_prompt})
        if limit and len(rows) >= limit:
            break
    if not rows:
        raise UserError("no usable conversations (need a human turn followed by a gpt reply)", file=str(path))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.rename(out)
    return out
