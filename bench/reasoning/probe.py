#!/usr/bin/env python
"""Send streaming /v1/chat/completions requests one at a time, record every SSE event (its time,
which delta fields it carries) and the usage, and compute TTFT / TPOT / ITL three ways:

  every   - any delta carrying generated text (content, reasoning or reasoning_content) is a token
            arrival: what guidellm 0.8.1 and vLLM's own bench client (0.32) time.
  content - only deltas with non-empty `content`: a client that ignores reasoning fields
            (guidellm <= 0.5.x's stock chat handler).
  gpustack - the seed's client: guidellm 0.5.x with GPUStack benchmark-runner's
            `chat_completions_with_reasoning` handler (commit 6ec30ae, 2026-02-10), which counts a
            delta when `content is not None or reasoning_content is not None`; vLLM >= 0.16 sends
            `reasoning`, so only the role chunk (content "") and content deltas count. TPOT and
            ITL then use guidellm's formulas: TPOT = (last_token - start) / output_tokens,
            ITL = (last_token - first_token) / (output_tokens - 1), output_tokens from usage.

    .venv/bin/python bench/reasoning/probe.py --url http://127.0.0.1:8011 --n 8 --max-tokens 32 \
        --out bench/reasoning/results/probe-parser-on.json

Writes a JSON with the per-request events (times relative to the request start) and a summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import httpx

WORDS = "the quick brown fox jumps over a lazy dog while seven sailors sing about the sea".split()


def one(client: httpx.Client, url: str, model: str, prompt: str, max_tokens: int) -> dict:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_completion_tokens": max_tokens,
        "ignore_eos": True,  # as guidellm and `vllm bench serve` do for synthetic data
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = []
    start = time.perf_counter()
    with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.strip():
                continue
            t = time.perf_counter() - start
            data = line.removeprefix("data: ").strip()
            if data == "[DONE]":
                events.append({"t": t, "done": True})
                break
            obj = json.loads(data)
            ev = {"t": t}
            if obj.get("choices"):
                ch = obj["choices"][0]
                ev["delta"] = ch.get("delta", {})
                if ch.get("finish_reason"):
                    ev["finish_reason"] = ch["finish_reason"]
            if obj.get("usage"):
                ev["usage"] = obj["usage"]
            events.append(ev)
    return {"prompt": prompt, "events": events}


def fields(ev: dict) -> set[str]:
    return set(ev.get("delta", {}))


def timings(req: dict) -> dict:
    evs = req["events"]
    usage = next((e["usage"] for e in evs if "usage" in e), {})
    out_tokens = usage.get("completion_tokens")
    deltas = [e for e in evs if "delta" in e]

    def text(e, key):
        v = e["delta"].get(key)
        return v if isinstance(v, str) and v else None

    every = [e["t"] for e in deltas if text(e, "content") or text(e, "reasoning") or text(e, "reasoning_content")]
    content = [e["t"] for e in deltas if text(e, "content")]
    gpustack = [e["t"] for e in deltas
                if e["delta"].get("content") is not None or e["delta"].get("reasoning_content") is not None]
    last_event = evs[-1]["t"]

    def stats(ts: list[float], guidellm_formula: bool = False) -> dict:
        if not ts:
            return {"ttft_ms": None, "tpot_ms": None, "itl_ms": None, "arrivals": 0}
        gaps = [b - a for a, b in zip(ts, ts[1:])]
        d = {"ttft_ms": 1000 * ts[0], "arrivals": len(ts),
             # mean gap between arrivals, as vLLM's bench client lists ITL
             "itl_ms": 1000 * statistics.mean(gaps) if gaps else None,
             # vLLM bench-style TPOT: (latency - ttft) / (output_tokens - 1)
             "tpot_ms": 1000 * (ts[-1] - ts[0]) / (out_tokens - 1) if out_tokens and out_tokens > 1 else None}
        if guidellm_formula and out_tokens:
            d["tpot_ms"] = 1000 * ts[-1] / out_tokens                       # guidellm: (last - start)/n
            d["itl_ms"] = 1000 * (ts[-1] - ts[0]) / (out_tokens - 1)        # guidellm: (last - first)/(n-1)
        return d

    kinds = {"reasoning": 0, "reasoning_content": 0, "content": 0, "role_only": 0, "empty": 0}
    for e in deltas:
        f = fields(e)
        if text(e, "reasoning"):
            kinds["reasoning"] += 1
        if text(e, "reasoning_content"):
            kinds["reasoning_content"] += 1
        if text(e, "content"):
            kinds["content"] += 1
        if "role" in f and not text(e, "content"):
            kinds["role_only"] += 1
        if not any(text(e, k) for k in ("content", "reasoning", "reasoning_content")) and "role" not in f:
            kinds["empty"] += 1
    return {
        "completion_tokens": out_tokens,
        "reasoning_tokens": (usage.get("completion_tokens_details") or {}).get("reasoning_tokens"),
        "latency_ms": 1000 * last_event,
        "delta_kinds": kinds,
        "field_sets": sorted({",".join(sorted(fields(e))) for e in deltas}),
        "every": stats(every),
        "content": stats(content),
        "gpustack_guidellm05": stats(gpustack, guidellm_formula=True),
        "every_guidellm_formula": stats(every, guidellm_formula=True),
    }


def mean(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.mean(xs), 2) if xs else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8011")
    ap.add_argument("--model", default=None)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    with httpx.Client(timeout=300) as client:
        model = args.model or client.get(f"{args.url}/v1/models").json()["data"][0]["id"]
        reqs = []
        for i in range(args.n):
            prompt = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(20))
            reqs.append(one(client, args.url, model, prompt, args.max_tokens))
    per = [timings(r) for r in reqs]
    summary = {"n": len(per), "model": model, "max_tokens": args.max_tokens,
               "latency_ms": mean([p["latency_ms"] for p in per]),
               "completion_tokens": mean([p["completion_tokens"] for p in per]),
               "requests_with_content": sum(1 for p in per if p["delta_kinds"]["content"]),
               "delta_kinds_total": {k: sum(p["delta_kinds"][k] for p in per) for k in per[0]["delta_kinds"]},
               "field_sets": sorted({s for p in per for s in p["field_sets"]})}
    for way in ("every", "content", "gpustack_guidellm05", "every_guidellm_formula"):
        summary[way] = {k: mean([p[way][k] for p in per]) for k in ("ttft_ms", "tpot_ms", "itl_ms", "arrivals")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "requests": [
        {**t, "events": r["events"]} for t, r in zip(per, reqs)]}, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
