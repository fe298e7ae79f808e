"""The report's sections of a halving sweep (what each rung spent, why each trial stopped) and of
the memory-fit predictor's error (farm/analysis/halving.py, farm/analysis/memory_fit.py).

A report of one sweep shows its lines as the sweep printed them; a report of several (`farm
report A B`) gives each sweep that has them its own subsection, named by its sweep id, since
each halving sweep spent its own budget and stopped its own trials."""

from __future__ import annotations

from typing import Any

from farm.analysis.halving import summary_lines
from farm.analysis.memory_fit import check_lines
from farm.report.doc import Doc
from farm.report.models import HalvingNote, MemoryFitNote, Report


def halving_lines(note: HalvingNote) -> list[str]:
    return summary_lines(note.plan, note.labels)


def memory_fit_lines(note: MemoryFitNote) -> list[str]:
    return check_lines(note.checks)


def _sections(report: Report) -> list[tuple[str, list[tuple[str | None, list[str]]]]]:
    return [("Halving", [(n.sweep_id, halving_lines(n)) for n in report.halving]),
            ("Memory fit", [(n.sweep_id, memory_fit_lines(n)) for n in report.memory_fit])]


def search_sections(doc: Doc, report: Report) -> None:
    for title, notes in _sections(report):
        notes = [(sweep, lines) for sweep, lines in notes if lines]
        if not notes:
            continue
        doc.h(title)
        for sweep, lines in notes:
            if sweep is not None:
                doc.h3(f"Sweep {doc.tick(sweep)}")
            doc.p(lines[0])
            if len(lines) > 1:
                doc.p("\n".join(("- " if doc.md else "") + line.strip() for line in lines[1:]))


def search_json(report: Report) -> dict[str, Any]:
    """The sections' keys of the report's JSON, only where the report has them (a grid sweep's
    JSON is what it was before halving existed)."""
    out: dict[str, Any] = {}
    halving = [{"sweep_id": n.sweep_id, **n.plan.model_dump(mode="json"), "lines": halving_lines(n)}
               for n in report.halving]
    for h, n in zip(halving, report.halving):
        for stop in h["stops"]:
            stop["label"] = n.labels.get(stop["trial"], stop["trial"])
    if halving:
        out["halving"] = halving
    fits = [{"sweep_id": n.sweep_id, "trials": [{**c.model_dump(), "error_pct": None if c.error is None else c.error * 100}
                                                for c in n.checks], "lines": memory_fit_lines(n)}
            for n in report.memory_fit if memory_fit_lines(n)]
    if fits:
        out["memory_fit"] = fits
    return out
