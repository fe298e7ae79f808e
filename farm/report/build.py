"""Building the report: selection, the checks the seed missed and the rate analysis, in one `Report`.

`build_report` computes; the renderers (farm.report.text) only format what it computed, so text,
markdown and JSON always tell the same story.
"""

from __future__ import annotations

from pathlib import Path

from farm.analysis.cost import costs
from farm.analysis.gpu_time import gpu_time
from farm.analysis.records import Results
from farm.analysis.reference import compare_with_reference
from farm.analysis.results_file import read_results_file
from farm.analysis.select import (
    ReportWarning,
    SelectionSettings,
    pct_text,
    select,
    settings_for,
)
from farm.analysis.selection.machines import machines_note
from farm.report.checks import check_warnings, peak_note
from farm.report.models import Report
from farm.report.rates import rate_analysis
from farm.study.spec import Study


# --------------------------------------------------------------------------------------
# building




def build_report(results: Results, settings: SelectionSettings, strategy: str = "best",
                 prices: dict[str, float] | None = None) -> Report:
    selection = select(results, settings, strategy, metric=results.deciding_metric)
    rate = rate_analysis(results, settings, selection)
    warnings = check_warnings(results, selection, rate)
    models = ", ".join(dict.fromkeys(r.model for r in results.records))
    spent = gpu_time(results)
    return Report(title=f"Throughput optimization of {models}", selection=selection, warnings=warnings,
                  rate_analysis=rate, results=results, gpu_time=spent,
                  costs=costs(results, selection, prices, gpu_time=spent, confidence=1 - settings.alpha),
                  slo={p: slo_text(spec) for p, spec in settings.slo.items()},
                  success_floors={p: spec.min_success_rate for p, spec in settings.slo.items()
                                  if spec.min_success_rate is not None},
                  notes=[n for n in (peak_note(results), machines_note(results)) if n])


def slo_text(slo) -> str:
    parts = []
    if slo.ttft_p95_ms_max is not None:
        parts.append(f"P95 TTFT <= {slo.ttft_p95_ms_max:g} ms")
    if slo.tpot_mean_ms_max is not None:
        parts.append(f"mean TPOT <= {slo.tpot_mean_ms_max:g} ms")
    if slo.latency_per_output_token_mean_ms_max is not None:
        parts.append(f"mean latency per output token <= {slo.latency_per_output_token_mean_ms_max:g} ms")
    if slo.min_success_rate is not None:
        parts.append(f"success rate >= {pct_text(slo.min_success_rate)}")
    return ", ".join(parts) + (" (mean over the repeats); also guidellm goodput" if slo.goodput else " (mean over the repeats)")


def report_for(results: Results, study: "Study", *, strategy: str = "best", baseline: str | None = None,
               grid: str | None = None, prefer_results_profile: bool = False) -> Report:
    """The one entry point of `farm analyze`, `farm report` and the end of `farm sweep`."""
    settings = settings_for(results, study, baseline=baseline, grid=grid, prefer_results_profile=prefer_results_profile)
    report = build_report(results, settings, strategy, prices=study.prices)
    ref = study.reference
    if ref is not None:
        if Path(ref.results).is_file():
            report.reference = compare_with_reference(results, read_results_file(ref.results), label=ref.label,
                                                      profiles=ref.profiles, note=ref.note)
        else:  # a stored sweep's study names the file where the sweep ran: another machine may not have it
            report.warnings.append(ReportWarning(
                code="reference_missing", message=f"the study's reference results {ref.results} are not on this "
                f"machine: farm's numbers are reported without the {ref.label}'s beside them; "
                f"`farm analyze --results FILE --config STUDY` sets them side by side"))
    return report
