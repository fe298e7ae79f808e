"""The report's sections of a halving sweep (what each rung spent, why each trial stopped) and of
the memory-fit predictor's error (farm/analysis/halving.py, farm/analysis/memory_fit.py)."""

from __future__ import annotations

from farm.report.doc import Doc
from farm.report.models import Report


def search_sections(doc: Doc, report: Report) -> None:
    for title, lines in (("Halving", report.halving), ("Memory fit", report.memory_fit)):
        if lines:
            doc.h(title)
            doc.p(lines[0])
            if len(lines) > 1:
                doc.p("\n".join(("- " if doc.md else "") + line.strip() for line in lines[1:]))
