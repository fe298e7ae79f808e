"""The files of a report (`--out DIR`, a sweep's MLflow `report/`): report.md, the appendix beside it,
the plots' folder, and the one plot the Conclusion shows. Names only, so that the report can link
them before they are written."""

from __future__ import annotations

import re

from farm.report.doc import Doc
from farm.report.models import Report

REPORT = "report.md"
APPENDIX = "appendix.md"  # every trial's row and every run's figures: opened on purpose
PLOTS = "plots"
THROUGHPUT_PLOT = "total_tps_by_profile.png"


def capacity_plot(profile: str) -> str:
    return f"capacity_{profile}.png"


def lead_plot(report: Report) -> str:
    """The plot that shows the recommendation, relative to report.md: the capacity of every trial where
    the recommendation is by capacity under an SLO, else every trial's throughput on each profile with
    its interval (the recommended green, the baseline blue)."""
    sel = report.selection
    if any(c.profile == sel.primary_profile for c in sel.capacity):
        return f"{PLOTS}/{capacity_plot(sel.primary_profile)}"
    return f"{PLOTS}/{THROUGHPUT_PLOT}"


def appendix_ref(doc: Doc, section: str) -> str:
    """'the appendix's "SECTION"', a link to its heading in markdown (GitHub's anchor for it)."""
    anchor = re.sub(r"[^a-z0-9 -]", "", section.lower()).replace(" ", "-")
    return doc.link(f"the appendix's \"{section}\"", f"{APPENDIX}#{anchor}")
