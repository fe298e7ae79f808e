"""The ShareGPT profile's data path: a ShareGPT-format file the test writes, prepared by farm and
sent by real guidellm to a real mock-server engine (one trial, run by the actor's runner)."""

from __future__ import annotations

import json

from actors.bench import TrialJob, TrialRunner
from actors.datasets import prepare_sharegpt
from farm.study.grid import expand
from farm.analysis.results import Status
from farm.study.spec import Study
from actors.tokenizer import resolve_tokenizer

CONVERSATIONS = [
    {"id": str(i), "conversations": [
        {"from": "human", "value": f"question {i}: " + "tell me how the scheduler batches requests " * (1 + i % 4)},
        {"from": "gpt", "value": "the scheduler keeps prefixes warm and batches tokens " * (2 + i % 3)},
    ]}
    for i in range(40)
] + [{"id": "bad", "conversations": [{"from": "gpt", "value": "no human turn first"}]}]


def _study(path) -> Study:
    return Study.model_validate({
        "name": "sharegpt-test", "models": {"tiny": {"name": "farm-tiny", "tokenizer": "farm:tiny"}},
        "engines": {"mock": {"flags": {"ttft-ms": 5, "itl-ms": 1}, "ready_timeout_s": 60}},
        "profiles": {"sharegpt": {"data": {"kind": "sharegpt", "path": str(path)}, "requests": 20,
                                  "rate": 1000, "max_concurrency": 8, "max_seconds": 120}},
        "primary_profile": "sharegpt",
        "grids": {"one": {"blocks": [{"engine": "mock", "models": ["tiny"]}]}},
    })


def test_prepare_keeps_human_prompt_and_reply_length(tmp_path):
    src = tmp_path / "sharegpt.json"
    src.write_text(json.dumps(CONVERSATIONS))
    out = prepare_sharegpt(src, tmp_path / "cache", resolve_tokenizer("farm:tiny", "x"))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 40  # the malformed conversation is skipped
    assert rows[0]["prompt"].startswith("question 0:")
    assert all(r["output_tokens_count"] >= 4 for r in rows)
    # the same file and tokenizer give the same prepared file (every run reads the same requests)
    assert prepare_sharegpt(src, tmp_path / "cache", resolve_tokenizer("farm:tiny", "x")) == out


def test_sharegpt_profile_runs_against_a_real_engine(tmp_path):
    src = tmp_path / "sharegpt.json"
    src.write_text(json.dumps(CONVERSATIONS))
    study = _study(src)
    trial = expand(study, "one")[0]
    job = TrialJob(sweep_id="t", trial=trial, engine_spec=study.engines["mock"], profiles=study.profiles,
                   workdir=str(tmp_path / "runs"))
    result = TrialRunner(job).run()
    assert result.status == Status.ok, result.reason
    run = result.runs[0]
    assert run.metrics.successful_requests >= 19  # one request may still be in flight at the end
    assert run.metrics.total_output_tokens > 0 and run.metrics.total_tps > 0
    scenario = json.loads((tmp_path / "runs" / "t" / trial.id / "attempt-1" / "sharegpt-r0.scenario.json").read_text())
    assert scenario["data"][0]["kind"] == "json_file"


def test_missing_sharegpt_file_is_a_clear_result(tmp_path):
    missing = tmp_path / "nowhere" / "ShareGPT.json"
    study = _study(missing)
    trial = expand(study, "one")[0]
    job = TrialJob(sweep_id="t", trial=trial, engine_spec=study.engines["mock"], profiles=study.profiles,
                   workdir=str(tmp_path / "runs"))
    result = TrialRunner(job).run()
    assert result.status == Status.dataset_missing
    assert str(missing) in result.reason and result.engine_pid is None
