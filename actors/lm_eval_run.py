"""The quality gate through lm-eval-harness: `lm_eval` against the trial's own running server.

`lm_eval --model local-completions` (lm-eval 0.4, farm's optional `[quality]` extra) sends the
study's task (a local task YAML under `quality.include_path`, over a local dataset: nothing is
fetched, `HF_DATASETS_OFFLINE` and `HF_HUB_OFFLINE` set) to the server's `/v1/completions`,
with the task's own generation settings (a greedy task says `do_sample: false`), `--limit` the
study's items, and `--log_samples`, whose per-item file is what the gate pairs: each sample's
`doc.id` (else its `doc_id`) and its first metric (1 = right). It runs in the task's folder, so
a YAML's `data_files` are relative to it; in its own session, output to `lm-eval.log`, stopped
by process group when the trial is cancelled or it runs past its time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from farm.analysis.quality_runs import ItemAnswer, QualityJob, QualityRun, failed_run, scored_run

LM_EVAL_TIMEOUT_S = 3600.0
AT_ONCE = 4


def lm_eval_launcher() -> list[str]:
    """`lm_eval` on PATH, else this Python's `-m lm_eval` (farm installed with `[quality]`)."""
    found = shutil.which("lm_eval")
    return [found] if found else [sys.executable, "-m", "lm_eval"]


def lm_eval_argv(job: QualityJob, base_url: str, model: str, out: Path, launcher: list[str] | None = None) -> list[str]:
    """The `lm_eval` command of a job (pure)."""
    task = job.lm_eval
    if task is None:
        raise ValueError("not an lm-eval job")
    model_args = ",".join([f"model={model}", f"base_url={base_url.rstrip('/')}/v1/completions",
                           f"num_concurrent={AT_ONCE}", "max_retries=2", "tokenized_requests=False",
                           "tokenizer_backend=None"])
    argv = [*(launcher or lm_eval_launcher()), "--model", "local-completions", "--model_args", model_args,
            "--tasks", task.task, "--limit", str(task.limit), "--output_path", str(out), "--log_samples"]
    if task.include_path:
        argv += ["--include_path", task.include_path]
    return argv


def read_samples(out: Path, task: str) -> list[ItemAnswer]:
    """Each item's correctness from lm-eval's `samples_<task>_*.jsonl` under `out`; a `ValueError` says what is missing."""
    files = sorted(out.rglob(f"samples_{task}_*.jsonl"))
    if not files:
        raise ValueError(f"lm_eval wrote no samples_{task}_*.jsonl under {out}")
    answers = []
    for line in files[-1].read_text().splitlines():
        if not line.strip():
            continue
        sample = json.loads(line)
        metrics = sample.get("metrics") or []
        if not metrics or metrics[0] not in sample:
            raise ValueError(f"a sample of {task} has no metric value ({metrics})")
        doc = sample.get("doc") if isinstance(sample.get("doc"), dict) else {}
        item = str(doc.get("id", sample.get("doc_id")))
        resps = sample.get("filtered_resps") or [""]
        text = resps[0] if isinstance(resps[0], str) else json.dumps(resps[0])
        answers.append(ItemAnswer(id=item, correct=float(sample[metrics[0]]) >= 1.0, answer=text.strip()[:200]))
    return answers


def _wait(proc: subprocess.Popen, cancelled: threading.Event, timeout_s: float) -> str | None:
    """None when lm_eval ended by itself; else why it was stopped (its group killed)."""
    end = time.monotonic() + timeout_s
    while proc.poll() is None:
        if cancelled.is_set() or time.monotonic() > end:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return "cancelled" if cancelled.is_set() else f"lm_eval ran past {timeout_s:g} s"
        time.sleep(0.5)
    return None


def run_lm_eval(job: QualityJob, base_url: str, model: str, workdir: Path, *, cancelled: threading.Event,
                timeout_s: float = LM_EVAL_TIMEOUT_S) -> QualityRun:
    """The job through lm_eval; its run, or why it failed (the log's last line)."""
    started = time.monotonic()
    assert job.lm_eval is not None
    out = workdir / "lm-eval"
    argv = lm_eval_argv(job, base_url, model, out)
    (workdir / "lm-eval-command.txt").write_text(" ".join(argv) + "\n")
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    cwd = job.lm_eval.include_path if job.lm_eval.include_path and Path(job.lm_eval.include_path).is_dir() else None
    log = workdir / "lm-eval.log"
    try:
        with open(log, "wb") as sink:
            proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    cwd=cwd, start_new_session=True)
    except OSError as exc:
        return failed_run(job, f"lm_eval could not start ({exc}): install farm[quality]", time.monotonic() - started)
    stopped = _wait(proc, cancelled, timeout_s)
    seconds = time.monotonic() - started
    if stopped or proc.returncode != 0:
        last = next((ln for ln in reversed(log.read_text(errors="replace").splitlines()) if ln.strip()), "")
        return failed_run(job, f"{stopped or f'lm_eval exited with code {proc.returncode}'}: {last[-300:]}", seconds)
    try:
        return scored_run(job, read_samples(out, job.lm_eval.task), seconds)
    except (ValueError, OSError) as exc:
        return failed_run(job, str(exc), seconds)
