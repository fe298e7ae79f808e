#!/usr/bin/env python
"""Copy the tiny Qwen3-MoE into a "thinking" variant: <think>/</think> as tokens, a Qwen3-style
chat template that opens `<think>\\n` for the assistant turn, and an lm_head row that makes the
random-weight model close its think block after a few tokens.

    .venv/bin/python bench/reasoning/make_think_model.py [SRC] [DST] [--end-logit X]

SRC defaults to .models/tiny-qwen3-moe (scripts/make-tiny-model.py), DST to /tmp/tiny-think-moe.
The two tokens are appended (vocab 1024 -> 1026, embeddings resized). `</think>`'s lm_head row is
set along the mean final hidden state so that its logit sits about --end-logit above the others:
with the default 4.2 the think block ends after a few dozen tokens (measured at 128 output
tokens: 293 reasoning deltas over 8 requests, 1 of 8 never left <think>); -20 never ends it.
Runs in farm's venv (torch + transformers); a few seconds.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src", nargs="?", type=Path, default=REPO / ".models" / "tiny-qwen3-moe")
    ap.add_argument("dst", nargs="?", type=Path, default=Path("/tmp/tiny-think-moe"))
    ap.add_argument("--end-logit", type=float, default=4.2,
                    help="how far above the other logits </think> sits; -20 makes a model that never closes the block")
    args = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if args.dst.exists():
        shutil.rmtree(args.dst)
    tok = AutoTokenizer.from_pretrained(str(args.src))
    model = AutoModelForCausalLM.from_pretrained(str(args.src), dtype=torch.float32).eval()

    added = tok.add_tokens(["<think>", "</think>"], special_tokens=False)
    assert added == 2, added
    tok.chat_template = TEMPLATE
    start_id, end_id = tok.convert_tokens_to_ids(["<think>", "</think>"])
    model.resize_token_embeddings(len(tok), mean_resizing=False)

    # Mean final hidden state over a few sampled continuations: its direction gives a logit that
    # is about the same at every step, so </think> comes with a steady per-step probability.
    torch.manual_seed(0)
    prompts = ["hello there how are you", "tell me a story about the sea", "one two three four five"]
    hidden = []
    with torch.no_grad():
        for p in prompts:
            ids = tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                          return_tensors="pt", return_dict=True)["input_ids"]
            out = model.generate(ids, max_new_tokens=32, do_sample=True, output_hidden_states=True,
                                 return_dict_in_generate=True, pad_token_id=0)
            hidden += [step[-1][0, -1] for step in out.hidden_states]
    h = torch.stack(hidden)
    m = h.mean(0)
    w = model.lm_head.weight
    with torch.no_grad():
        w[end_id] = m / m.dot(m) * args.end_logit
        w[start_id] = m / m.dot(m) * -max(abs(args.end_logit), 4.0)  # never reopen a think block
        others = (h @ w[:start_id].T)
        end = h @ w[end_id]
    print(f"</think> logit over {len(h)} states: mean {end.mean():.2f} min {end.min():.2f}; "
          f"other logits mean {others.mean():.3f} std {others.std():.3f}")

    model = model.to(torch.bfloat16)
    model.config.vocab_size = len(tok)
    model.save_pretrained(str(args.dst))
    tok.save_pretrained(str(args.dst))
    for extra in ("generation_config.json",):
        if (args.src / extra).exists():
            shutil.copy(args.src / extra, args.dst / extra)
    # Check: the ids round-trip and the template opens the block.
    tok2 = AutoTokenizer.from_pretrained(str(args.dst))
    assert tok2.encode("<think>") == [start_id] and tok2.encode("</think>") == [end_id]
    text = tok2.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n<think>\n"), text
    print(f"wrote {args.dst}: <think>={start_id} </think>={end_id}, vocab {len(tok2)}")


if __name__ == "__main__":
    main()
