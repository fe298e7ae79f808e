"""The quality gate in the report: each trial's cell in the throughput table, the "Quality gate"
section (accuracy, reference, paired verdict, agreement), the Conclusion's line on the trials it
refused, and the JSON of it. From `Results.quality` (farm/analysis/quality_verdicts.py) alone.
"""

from __future__ import annotations

from typing import Any

from farm.analysis.quality_gate import NOT_GATED
from farm.report.doc import Doc
from farm.report.models import Report


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x * 100:.1f} %"


def quality_cell(report: Report, trial: str) -> str:
    """A few words for the throughput table's Quality column: accuracy and verdict, or why none."""
    q = report.results.quality.get(trial)
    if q is None:
        return ""
    s = q.status
    if s.status == NOT_GATED:
        return f"{_pct(q.accuracy)} (reference)" if q.accuracy is not None else "not gated"
    if s.verdict is not None:
        v = s.verdict
        word = "significantly worse" if v.verdict == "worse" else (
            "equivalent within margin" if v.verdict == "equivalent" else v.verdict)
        return f"{_pct(v.accuracy)} vs {_pct(v.reference_accuracy)}: {word} (p {v.p_value:.2g})"
    return s.status


def _labels(report: Report) -> dict[str, str]:
    return {r.trial: r.name or r.trial for r in report.results.records}


def quality_section(doc: Doc, report: Report) -> None:
    """Every trial the gate saw: its accuracy, its reference, the paired verdict and its why."""
    gate = report.results.quality
    if not gate:
        return
    name = _labels(report)
    doc.h("Quality gate")
    doc.p("Each trial that changes numerics answered the study's evaluation through its own server (greedy), "
          "and so did its reference; the verdict pairs the two item by item (McNemar's exact test for worse, "
          "the paired difference's interval inside the margin for equivalent). A trial significantly worse is "
          "never recommended. Dummy weights answer nothing: such a trial is never checked, never passed.")
    rows = []
    for trial, q in gate.items():
        s, v = q.status, q.status.verdict
        ref = s.reference
        rows.append([name.get(trial, s.name or trial), _pct(q.accuracy), str(q.items or ""),
                     f"{name.get(ref.trial, ref.name or ref.trial)} ({ref.found})" if ref else "",
                     s.status, f"{v.difference * 100:+.1f} [{v.low * 100:+.1f}, {v.high * 100:+.1f}]" if v else "",
                     f"{v.p_value:.3g}" if v else "", _pct(v.first_token_agreement) if v else "",
                     _pct(v.answer_agreement) if v else ""])
    doc.table(["Trial", "Accuracy", "Items", "Reference", "Quality", "Difference, points [CI]", "McNemar p",
               "First-token agreement", "Answer agreement"], rows)
    doc.items([f"{doc.tick(name.get(t, q.status.name or t))}: {q.status.why}" for t, q in gate.items()
               if q.status.status != NOT_GATED])


def quality_conclusion(report: Report, tick=lambda s: s) -> list[str]:
    """The Conclusion's sentence on the trials the gate refused, and on gated trials left unchecked."""
    gate = report.results.quality
    name = _labels(report)
    out = []
    refused = [(t, q) for t, q in gate.items() if q.refused]
    if refused:
        out.append("Skipped by the quality gate (significantly worse answers than their reference, never "
                   "recommended): " + "; ".join(f"{tick(name.get(t, t))}: {q.status.why}" for t, q in refused) + ".")
    rec = report.selection.recommended.trial
    if rec in gate and gate[rec].status.gated:
        out.append(f"Quality of the recommendation: {gate[rec].status.why}.")
    return out


def quality_json(report: Report) -> dict[str, Any]:
    return {"quality": {t: {"accuracy": q.accuracy, "items": q.items, "error": q.error,
                            **q.status.model_dump(exclude={"trial"})} for t, q in report.results.quality.items()}}
