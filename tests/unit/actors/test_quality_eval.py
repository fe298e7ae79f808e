"""The quality gate's clients (actors/quality_eval.py, actors/lm_eval_run.py) against a real
`guidellm mock-server` (an OpenAI-compatible server that answers with random text: every answer
wrong, which is what it is), and a server that is not there. The lm-eval route runs the real
`lm_eval` (lm-eval-harness, farm's `[quality]` extra) with the committed local task
configs/lm-eval/tiny_answers; it is skipped where lm-eval is not installed, never faked."""

from __future__ import annotations

import importlib.util
import shutil
import threading
from pathlib import Path

import pytest

from actors.lm_eval_run import lm_eval_argv, read_samples, run_lm_eval
from actors.proc import free_port
from actors.quality_eval import answer_items, read_choice, run_quality, EvalFailed
from farm.analysis.quality_runs import LmEvalTask, QualityJob
from farm.analysis.quality_task import read_task
import sweeptools

REPO = Path(__file__).resolve().parents[3]
EVAL = REPO / "models" / "tiny-answers" / "eval.jsonl"
TASK_DIR = REPO / "configs" / "lm-eval" / "tiny_answers"
HAS_LM_EVAL = shutil.which("lm_eval") is not None or importlib.util.find_spec("lm_eval") is not None


@pytest.fixture(scope="module")
def mock_server():
    with sweeptools.mock_server(ttft_ms=1, itl_ms=1) as url:
        yield url


def _job(n: int = 20) -> QualityJob:
    return QualityJob(task="eval.jsonl", harness="farm", items=read_task(EVAL, items=n), max_tokens=8)


def test_every_item_is_asked_greedily_and_scored(mock_server, tmp_path):
    run = run_quality(_job(), mock_server, "farm-tiny", tmp_path, cancelled=threading.Event())
    assert run.error is None and run.items == 20 and len(run.answers) == 20
    assert [a.id for a in run.answers] == [i.id for i in read_task(EVAL, items=20)]  # the file's order
    # the mock's random text answers no arithmetic: every item wrong, accuracy 0, not a failure
    assert run.correct == 0 and run.accuracy == 0.0 and all(a.answer for a in run.answers)
    assert (tmp_path / "quality.json").is_file()


def test_a_server_that_is_gone_is_a_failed_evaluation_not_an_exception(tmp_path):
    port = free_port("127.0.0.1")
    run = answer_items(_job(3), f"http://127.0.0.1:{port}", "m")
    assert run.error and run.error.startswith("item addition-0000: ConnectError") and run.accuracy is None
    dead = answer_items(_job(3), "http://127.0.0.1:1", "m", alive=lambda: False)
    assert dead.error == "the engine exited during the evaluation"


def test_the_first_token_is_read_where_the_server_gives_it():
    answer = {"choices": [{"text": "118", "logprobs": {"tokens": ["1", "18"], "token_logprobs": [-0.1, -0.2]}}]}
    assert read_choice(answer) == ("118", "1")
    assert read_choice({"choices": [{"text": "x", "logprobs": None}]}) == ("x", None)
    with pytest.raises(EvalFailed):
        read_choice({"error": "no"})


def test_the_lm_eval_command_drives_the_trials_server():
    job = QualityJob(task="tiny_answers", harness="lm-eval",
                     lm_eval=LmEvalTask(task="tiny_answers", include_path=str(TASK_DIR), limit=40))
    argv = lm_eval_argv(job, "http://127.0.0.1:8000/", "models/tiny-answers", Path("/tmp/out"), launcher=["lm_eval"])
    assert argv[:5] == ["lm_eval", "--model", "local-completions", "--model_args",
                        "model=models/tiny-answers,base_url=http://127.0.0.1:8000/v1/completions,num_concurrent=4,"
                        "max_retries=2,tokenized_requests=False,tokenizer_backend=None"]
    assert argv[5:] == ["--tasks", "tiny_answers", "--limit", "40", "--output_path", "/tmp/out", "--log_samples",
                        "--include_path", str(TASK_DIR)]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_LM_EVAL, reason="lm-eval is not installed (pip install 'farm[quality]')")
def test_a_real_lm_eval_run_against_the_server(mock_server, tmp_path):
    job = QualityJob(task="tiny_answers", harness="lm-eval",
                     lm_eval=LmEvalTask(task="tiny_answers", include_path=str(TASK_DIR), limit=20))
    run = run_lm_eval(job, mock_server, "farm-tiny", tmp_path, cancelled=threading.Event(), timeout_s=300)
    assert run.error is None, (tmp_path / "lm-eval.log").read_text()[-3000:]
    assert run.items == 20 and run.correct == 0  # the mock's random text
    # items are paired by the dataset's own ids, the same ids the built-in task uses
    assert [a.id for a in run.answers] == [i.id for i in read_task(EVAL, items=20)]
    assert read_samples(tmp_path / "lm-eval", "tiny_answers")[0].answer


@pytest.mark.slow
@pytest.mark.skipif(not HAS_LM_EVAL, reason="lm-eval is not installed (pip install 'farm[quality]')")
def test_lm_eval_that_fails_is_a_failed_evaluation(tmp_path):
    job = QualityJob(task="no_such_task", harness="lm-eval",
                     lm_eval=LmEvalTask(task="no_such_task", include_path=str(TASK_DIR), limit=20))
    run = run_lm_eval(job, "http://127.0.0.1:1", "m", tmp_path, cancelled=threading.Event(), timeout_s=300)
    assert run.error and run.accuracy is None
