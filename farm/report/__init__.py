"""The report: the seed's shape in English (text and markdown), the JSON object, and PNG plots.

`build` runs selection, the checks the seed missed (`checks`, each a warning with a stable code)
and the throughput-from-totals analysis (`rates`) into one `Report` (`models`); `text` and
`plots` only format what it computed, so text, markdown and JSON always tell the same story.
"""

from farm.report.appendix import render_appendix, write_report_files
from farm.report.build import build_report, report_for, slo_text
from farm.report.models import EVIDENCE_CODES, WARNING_CODES, Report
from farm.report.plots import write_plots
from farm.report.summary import profile_numbers, summary_markdown, trial_verdicts, warning_groups
from farm.report.text import render, report_json, verdict_line

__all__ = ["EVIDENCE_CODES", "WARNING_CODES", "Report", "build_report", "render", "render_appendix", "report_for", "report_json", "slo_text",
           "verdict_line", "write_plots", "profile_numbers", "summary_markdown", "trial_verdicts", "warning_groups", "write_report_files"]
