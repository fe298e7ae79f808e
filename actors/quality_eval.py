"""The quality gate's client: a trial's own running server answers the gate's items.

Run by the trial's actor after its throughput runs, on the same engine start (no second server).
The built-in task (farm/analysis/quality_task.py): each prompt through the server's
OpenAI-compatible `/v1/completions`, greedy (temperature 0), `max_tokens` of the study, with
`logprobs: 1` so the first generated token is known where the server gives it; a few requests at
once. An lm-eval task goes to actors/lm_eval_run.py. Failures are data: a request that fails
twice, a server that dies, an answer that is not JSON end the evaluation with a `QualityRun`
whose `error` says why; the trial and its throughput stand.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from farm.analysis.quality_runs import ItemAnswer, QualityJob, QualityRun, failed_run, scored_run
from farm.analysis.quality_task import TaskItem, is_correct, normalize_answer
from farm.store.schema import QUALITY_ARTIFACT

AT_ONCE = 4  # requests in flight: enough to keep a small server busy, few enough not to time out on 2 cores
REQUEST_TIMEOUT_S = 120.0
ANSWER_CHARS = 200


class EvalFailed(RuntimeError):
    """The evaluation cannot go on; its message is the QualityRun's error."""


def completion_body(item: TaskItem, model: str, max_tokens: int) -> dict:
    """One greedy completion request (pure)."""
    return {"model": model, "prompt": item.prompt, "max_tokens": max_tokens, "temperature": 0, "logprobs": 1,
            "stream": False}


def read_choice(data: object) -> tuple[str, str | None]:
    """The completion's text and first token from an OpenAI-compatible answer; `EvalFailed` when it has none."""
    try:
        choice = data["choices"][0]  # type: ignore[index]
        text = choice["text"]
    except (KeyError, IndexError, TypeError):
        raise EvalFailed(f"the server's answer has no choices[0].text: {str(data)[:200]}") from None
    if not isinstance(text, str):
        raise EvalFailed(f"the server's choices[0].text is not text: {str(text)[:100]}")
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
    first = tokens[0] if isinstance(tokens, list) and tokens and isinstance(tokens[0], str) else None
    return text, first


def _ask(client: httpx.Client, url: str, item: TaskItem, model: str, max_tokens: int) -> ItemAnswer:
    last = ""
    for _ in range(2):  # one retry: a blink of a busy server is not a failed evaluation
        try:
            resp = client.post(url, json=completion_body(item, model, max_tokens))
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
            continue
        if resp.status_code >= 300:
            last = f"HTTP {resp.status_code}: {resp.text[:200]}"
            continue
        try:
            text, first = read_choice(resp.json())
        except ValueError:
            raise EvalFailed(f"item {item.id}: the server's answer is not JSON: {resp.text[:200]}") from None
        return ItemAnswer(id=item.id, correct=is_correct(item, text), answer=normalize_answer(text)[:ANSWER_CHARS],
                          first_token=first)
    raise EvalFailed(f"item {item.id}: {last}"[:500])


def answer_items(job: QualityJob, base_url: str, model: str, *, cancelled: threading.Event | None = None,
                 alive=lambda: True, at_once: int = AT_ONCE) -> QualityRun:
    """Every item of a built-in job through the server at `base_url`, `at_once` requests in flight;
    the run, or why it failed."""
    started = time.monotonic()
    url = base_url.rstrip("/") + "/v1/completions"
    cancelled = cancelled or threading.Event()

    def one(item: TaskItem) -> ItemAnswer | None:
        if cancelled.is_set() or not alive():
            return None
        return _ask(client, url, item, model, job.max_tokens)

    try:
        with httpx.Client(timeout=REQUEST_TIMEOUT_S) as client, ThreadPoolExecutor(at_once) as pool:
            answers = list(pool.map(one, job.items))
    except EvalFailed as exc:
        return failed_run(job, str(exc), time.monotonic() - started)
    if cancelled.is_set():
        return failed_run(job, "cancelled before every item was answered", time.monotonic() - started)
    if any(a is None for a in answers) or not alive():
        return failed_run(job, "the engine exited during the evaluation", time.monotonic() - started)
    return scored_run(job, [a for a in answers if a is not None], time.monotonic() - started)


def run_quality(job: QualityJob, base_url: str, model: str, workdir: Path, *, cancelled: threading.Event,
                alive=lambda: True) -> QualityRun:
    """The job on either harness; its answers written beside the trial's other artifacts (QUALITY_ARTIFACT)."""
    if job.harness == "lm-eval":
        from actors.lm_eval_run import run_lm_eval  # only a study that names an lm-eval task gets here

        run = run_lm_eval(job, base_url, model, workdir, cancelled=cancelled)
    else:
        run = answer_items(job, base_url, model, cancelled=cancelled, alive=alive)
    (workdir / QUALITY_ARTIFACT).write_text(run.model_dump_json(indent=1))
    return run
