"""The quality gate in a sweep: which trials answer the evaluation, and each gated trial's verdict
from what the trials answered.

- `quality_jobs`: before the sweep, the trials that answer (every gated trial that has a
  reference and is not on dummy weights, and each such reference), all with the same job: the
  study's task read once (its first `quality.items` items: `study_job`, called by the sweep's
  preflight, which hands the job down), or the lm-eval task it names. A trial answers it once, on
  its first engine start, after its throughput runs (a later pass or rung appends runs, never
  answers again; a resumed sweep reads the stored answers back).
- `quality_from_results`: after it, each trial's status (farm/analysis/quality_gate.py) with the
  paired verdict of every gated trial whose answers and reference's answers were stored; a run
  that failed is "quality not checked: ..." with its reason, never passed.
- `refusal`: why selection refuses a trial (significantly worse than its reference), or None.

Pure: the study, the trials and their results.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from pydantic import Field

from farm.analysis.quality import paired_verdict
from farm.analysis.quality_gate import NOT_YET, QualityStatus, quality_statuses
from farm.analysis.quality_runs import LmEvalTask, QualityJob, QualityRun
from farm.analysis.quality_task import read_task, task_path
from farm.strict import Strict
from farm.study.repeats import FAMILY_ALPHA
from farm.study.spec import Study
from farm.study.trial import Trial

if TYPE_CHECKING:
    from farm.analysis.results import TrialResult

FAILED = "quality not checked: its evaluation failed"
NO_ANSWERS = "quality not checked: no answers stored"


class TrialQuality(Strict):
    """One trial's line of the gate: its status (verdict included) and its own accuracy."""

    status: QualityStatus
    accuracy: float | None = Field(default=None, description="Its accuracy on the items; None: it answered none.")
    items: int = 0
    error: str | None = Field(default=None, description="Why its evaluation failed, where it did.")

    @property
    def refused(self) -> bool:
        return self.status.refused


def include_path(study: Study) -> str | None:
    """The lm-eval task folder, relative to the study file where it is relative."""
    q = study.quality
    if q is None or q.include_path is None:
        return None
    path = Path(q.include_path).expanduser()
    if not path.is_absolute() and study.source:
        path = Path(study.source).resolve().parent / path
    return str(path)


def study_job(study: Study) -> QualityJob | None:
    """The one job every answering trial gets; None without a quality section. Reads the built-in
    task (a `UserError` names the file, the line and the reason)."""
    q = study.quality
    if q is None:
        return None
    if q.harness == "lm-eval":
        return QualityJob(task=q.task, harness="lm-eval", max_tokens=q.max_tokens,
                          lm_eval=LmEvalTask(task=q.task, include_path=include_path(study), limit=q.items))
    path = task_path(study)
    items = read_task(path, items=q.items, shown=f"{study.source or 'study'}: quality.task {path}")
    return QualityJob(task=q.task, harness="farm", items=items, max_tokens=q.max_tokens)


def quality_jobs(study: Study, trials: Sequence[Trial], job: QualityJob | None = None) -> dict[str, QualityJob]:
    """Trial id -> its job, for the trials that answer (gated ones with a reference to check
    against, and those references); empty where the study has no quality section or nothing is gated.
    `job`: the study's job as `study_job` read it before (the sweep's preflight), so that the task
    is read once; read here where not given."""
    job = job if job is not None else study_job(study)
    if job is None:
        return {}
    roles: dict[str, list[str]] = {}
    for s in quality_statuses(trials, study):
        if s.status == NOT_YET and s.reference is not None:
            roles.setdefault(s.trial, []).append("gated")
            roles.setdefault(s.reference.trial, []).append(f"reference of {s.name or s.trial}")
    return {tid: job.model_copy(update={"role": "; ".join(dict.fromkeys(r))}) for tid, r in roles.items()}


def _unchecked(status: QualityStatus, label: str, why: str) -> QualityStatus:
    return status.model_copy(update={"status": label, "why": f"{label}: {why}"})


def quality_from_results(results: Sequence["TrialResult"], study: Study) -> dict[str, TrialQuality]:
    """Trial id -> its quality status, with the paired verdict where both sides answered; empty
    where the study has no quality section."""
    q = study.quality
    if q is None:
        return {}
    trials = [r.trial for r in results]
    runs: dict[str, QualityRun] = {r.trial.id: r.quality for r in results if r.quality is not None}
    verdicts = {}
    problems: dict[str, tuple[str, str]] = {}
    for s in quality_statuses(trials, study):
        if s.status != NOT_YET or s.reference is None:
            continue
        mine, ref = runs.get(s.trial), runs.get(s.reference.trial)
        for who, run in (("it", mine), ("its reference", ref)):
            if run is None:
                problems[s.trial] = (NO_ANSWERS, f"{who} stored no answers (it did not run, or ran before the gate)")
                break
            if run.error is not None or not run.answers:
                problems[s.trial] = (FAILED, f"{who}: {run.error or 'no answers'}")
                break
        if s.trial in problems:
            continue
        assert mine is not None and ref is not None
        shared = set(mine.correctness()) & set(ref.correctness())
        if not shared:
            problems[s.trial] = (FAILED, "it and its reference answered no item in common")
            continue
        pick = lambda d: {k: v for k, v in d.items() if k in shared}  # noqa: E731
        verdicts[s.trial] = paired_verdict(
            pick(mine.correctness()), pick(ref.correctness()), margin=q.margin, alpha=FAMILY_ALPHA,
            first_tokens=(mine.first_tokens(), ref.first_tokens()) if mine.first_tokens() else None,
            answers=(mine.texts(), ref.texts()))
    out = {}
    for s in quality_statuses(trials, study, verdicts):
        run = runs.get(s.trial)
        out[s.trial] = TrialQuality(status=_unchecked(s, *problems[s.trial]) if s.trial in problems else s,
                                    accuracy=run.accuracy if run else None, items=run.items if run else 0,
                                    error=run.error if run else None)
    return out


def refusal(quality: TrialQuality | None) -> str | None:
    """Why selection never recommends this trial: significantly worse than its reference; else None."""
    if quality is None or not quality.refused:
        return None
    status = quality.status
    ref = status.reference
    return (f"quality: significantly worse than {ref.name or ref.trial if ref else 'its reference'} "
            f"({status.verdict.why if status.verdict else status.why})")
