"""What a trial is asked to answer for the quality gate (`QualityJob`) and what it answered (`QualityRun`).

A job travels from the driver to the trial's actor inside its `TrialJob`; the actor answers it
through the trial's own running server, after its throughput runs (actors/quality_eval.py), and
the run travels back inside the `TrialResult` (its `quality`), stored with it in MLflow: each
item's correctness, answer and first token, so a gated trial and its reference are paired item
by item whenever the report is made, a resumed sweep included. Models only: no engine, no store.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from farm.analysis.quality_task import TaskItem
from farm.strict import Strict

Harness = Literal["farm", "lm-eval"]


class LmEvalTask(Strict):
    """An lm-eval-harness task, run by `lm_eval` against the trial's server (actors/lm_eval_run.py)."""

    task: str = Field(description="The task's name (lm_eval --tasks).")
    include_path: str | None = Field(default=None, description="A folder of local task YAMLs (lm_eval --include_path).")
    limit: int = Field(description="Items asked (lm_eval --limit): the study's quality.items.")


class QualityJob(Strict):
    """What one trial answers for the gate: the same for every trial of a sweep."""

    task: str = Field(description="The study's quality.task, as written (a .jsonl file or an lm-eval task).")
    harness: Harness
    items: list[TaskItem] = Field(default_factory=list, description="The built-in task's items (farm harness).")
    max_tokens: int = Field(default=32, ge=1, description="Tokens a greedy answer may take (farm harness).")
    lm_eval: LmEvalTask | None = None
    role: str = Field(default="", description="Why this trial answers: gated, a reference, or both (for its log).")


class ItemAnswer(Strict):
    """One item's answer."""

    id: str
    correct: bool
    answer: str = Field(default="", description="The answer as scored (normalized, at most 200 characters).")
    first_token: str | None = Field(default=None, description="The first generated token, where the server said it.")


class QualityRun(Strict):
    """One trial's answers to the gate's items, or why it has none."""

    task: str
    harness: Harness
    items: int = Field(default=0, ge=0, description="Items answered.")
    correct: int = Field(default=0, ge=0)
    answers: list[ItemAnswer] = Field(default_factory=list)
    error: str | None = Field(default=None, description="Why the evaluation gave no answers (it failed; the trial "
                              "and its throughput stand).")
    seconds: float | None = None

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.items if self.items and self.error is None else None

    def correctness(self) -> dict[str, bool]:
        return {a.id: a.correct for a in self.answers}

    def texts(self) -> dict[str, str]:
        return {a.id: a.answer for a in self.answers}

    def first_tokens(self) -> dict[str, str]:
        return {a.id: a.first_token for a in self.answers if a.first_token is not None}


def failed_run(job: QualityJob, why: str, seconds: float | None = None) -> QualityRun:
    return QualityRun(task=job.task, harness=job.harness, error=why[:1000], seconds=seconds)


def scored_run(job: QualityJob, answers: list[ItemAnswer], seconds: float | None = None) -> QualityRun:
    return QualityRun(task=job.task, harness=job.harness, items=len(answers), correct=sum(a.correct for a in answers),
                      answers=answers, seconds=seconds)
