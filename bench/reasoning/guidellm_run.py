#!/usr/bin/env python
"""Run guidellm 0.8.1 (farm's venv, through farm's own worker, as farm does) against a server with
a tiny synthetic chat profile, and print its request-level timings from the JSON report.

    .venv/bin/python bench/reasoning/guidellm_run.py --target http://127.0.0.1:8011 \
        --tokenizer /tmp/tiny-think-moe --out bench/reasoning/results/guidellm-parser-on.json

Profile: /v1/chat/completions, synthetic 32 prompt / 32 output tokens, 8 requests, one stream
(concurrent, streams 1 = synchronous). Reported per request: guidellm's TTFT, TTFOT (first content
token), ITL (= farm's tpot), TPOT (latency over all output tokens), token iterations, output
tokens, and whether its text / reasoning_output were non-empty; then the aggregate means farm reads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="http://127.0.0.1:8011")
    ap.add_argument("--model", default=None)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--output-tokens", type=int, default=32)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    backend = {"kind": "openai_http", "target": args.target, "request_format": "/v1/chat/completions"}
    if args.model:
        backend["model"] = args.model
    report = Path(tempfile.mkdtemp(prefix="guidellm-reasoning-")) / "report.json"
    spec = {
        "backend": backend,
        "profile": {"kind": "concurrent", "streams": [1]},
        "constraints": [{"kind": "max_requests", "count": args.requests}],
        "tokenizer": {"kind": "huggingface_auto", "model": args.tokenizer},
        "data": [{"kind": "synthetic_text", "prompt_tokens": args.prompt_tokens,
                  "output_tokens": args.output_tokens}],
        "seed": {"kind": "static", "value": 42},
        "outputs": [{"kind": "json", "path": str(report)}],
    }
    spec_path = report.with_name("spec.json")
    spec_path.write_text(json.dumps(spec))
    log = report.with_name("guidellm.log")
    with open(log, "w") as fh:
        rc = subprocess.call([sys.executable, "-m", "actors.guidellm_worker", str(spec_path)],
                             cwd=REPO, stdout=fh, stderr=subprocess.STDOUT)
    if rc != 0 or not report.exists():
        sys.exit(f"guidellm failed (rc {rc}); log {log}:\n" + log.read_text()[-3000:])

    data = json.loads(report.read_text())
    bench = data["benchmarks"][0]
    reqs = bench["requests"]["successful"]
    rows = []
    for r in reqs:
        t = r["info"]["timings"]
        rows.append({
            "ttft_ms": r.get("time_to_first_token_ms"),
            "ttfot_ms": r.get("time_to_first_output_token_ms"),
            "itl_ms": r.get("inter_token_latency_ms"),
            "tpot_ms": r.get("time_per_output_token_ms"),
            "latency_ms": 1000 * r["request_latency"] if r.get("request_latency") else None,
            "output_tokens": r.get("output_tokens"),
            "token_iterations": t.get("token_iterations"),
            "text_chars": len(r.get("output") or ""),
            "reasoning_chars": len(r.get("reasoning_output") or ""),
        })

    def mean(key):
        xs = [x[key] for x in rows if x[key] is not None]
        return round(statistics.mean(xs), 2) if xs else None

    m = bench["metrics"]

    def agg(name):
        d = m.get(name, {}).get("successful") or {}
        return round(d["mean"], 2) if d.get("mean") is not None else None

    summary = {
        "requests": len(rows),
        "request_means": {k: mean(k) for k in rows[0]},
        "requests_without_ttfot": sum(1 for x in rows if x["ttfot_ms"] is None),
        "aggregate_means": {k: agg(k) for k in ("time_to_first_token_ms", "time_to_first_output_token_ms",
                                                "inter_token_latency_ms", "time_per_output_token_ms",
                                                "request_latency")},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "requests": rows}, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
