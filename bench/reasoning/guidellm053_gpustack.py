#!/usr/bin/env python
"""Replay the seed's client: guidellm 0.5.3 (what gpustack/benchmark-runner's uv.lock pinned from
2026-02-10) with benchmark-runner's `chat_completions_with_reasoning` response handler (commit
6ec30ae, 2026-02-10), against a vLLM server, and print the request-level timings.

Runs in a separate venv holding guidellm 0.5.3 (not farm's):

    python3 -m venv /tmp/gl053 && /tmp/gl053/bin/pip install guidellm==0.5.3
    git --git-dir /work/.mirror/gpustack+benchmark-runner/repo \
        show 6ec30ae:benchmark_runner/custom_response_handler.py > /tmp/gpustack_handler.py
    /tmp/gl053/bin/python bench/reasoning/guidellm053_gpustack.py --handler /tmp/gpustack_handler.py \
        --target http://127.0.0.1:8011 --tokenizer /tmp/tiny-think-never \
        --out bench/reasoning/results/guidellm053-gpustack-parser-on-never.json

`--handler none` runs guidellm 0.5.3's stock chat handler instead (content deltas only).
The handler's code is loaded from the file at run time; nothing of it is copied here.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import tempfile
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--handler", required=True, help="path of benchmark-runner's custom_response_handler.py, or none")
    ap.add_argument("--target", default="http://127.0.0.1:8011")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    import guidellm
    from guidellm.benchmark import benchmark_generative_text
    from guidellm.benchmark.schemas.generative.entrypoints import BenchmarkGenerativeTextArgs

    backend_kwargs = {}
    if args.handler != "none":
        spec = importlib.util.spec_from_file_location("gpustack_handler", args.handler)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)  # registers "chat_completions_with_reasoning"
        backend_kwargs = {"response_handlers": {"chat_completions": mod.ChatCompletionsWithReasoningResponseHandler}}

    outdir = Path(tempfile.mkdtemp(prefix="gl053-"))
    bargs = BenchmarkGenerativeTextArgs.create(
        scenario=None,
        target=args.target,
        data=[f"prompt_tokens={args.prompt_tokens},output_tokens={args.output_tokens}"],
        profile="synchronous",
        max_requests=args.requests,
        processor=args.tokenizer,
        backend_kwargs=backend_kwargs or None,
        request_type="chat_completions",
        outputs=[],  # guidellm 0.5.3's json output cannot serialize the handler class (benchmark-runner has its own)
        output_dir=outdir,
    )
    result, _ = asyncio.run(benchmark_generative_text(args=bargs, progress=None, console=None))
    report = json.loads(result.model_dump_json(exclude={"args"}))
    bench = report["benchmarks"][0]
    rows = []
    for r in bench["requests"]["successful"]:
        t = r["info"]["timings"]
        rows.append({
            "ttft_ms": r.get("time_to_first_token_ms"),
            "itl_ms": r.get("inter_token_latency_ms"),
            "tpot_ms": r.get("time_per_output_token_ms"),
            "latency_ms": 1000 * r["request_latency"] if r.get("request_latency") else None,
            "output_tokens": r.get("output_tokens"),
            "token_iterations": t.get("token_iterations"),
        })
    m = bench["metrics"]

    def agg(name, stat="mean"):
        d = (m.get(name) or {}).get("successful") or {}
        v = d.get(stat)
        if v is None and stat == "p95":
            v = (d.get("percentiles") or {}).get("p95")
        return round(v, 3) if v is not None else None

    summary = {
        "guidellm": guidellm.__version__ if hasattr(guidellm, "__version__") else "0.5.3",
        "handler": "gpustack chat_completions_with_reasoning (6ec30ae)" if backend_kwargs else "guidellm stock",
        "requests": len(rows),
        "request_means": {k: round(statistics.mean([x[k] for x in rows if x[k] is not None]), 3)
                          if any(x[k] is not None for x in rows) else None for k in rows[0]},
        "report": {f"{n}.{s}": agg(n, s) for n in ("time_to_first_token_ms", "time_per_output_token_ms",
                                                   "inter_token_latency_ms", "request_latency")
                   for s in ("mean", "median")},
        "peak_output_tokens_per_second": agg("output_tokens_per_second", "max"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "requests": rows}, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
