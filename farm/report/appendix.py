"""The report's appendix (appendix.md beside report.md): what a reader opens on purpose, never on the
first screen: every number's definition, every trial's row on every profile, each trial's start,
limits and GPU time, both rates' ranks, and every run's figures in the seed's Serving Benchmark
Result block. `write_report_files` writes report.md, the appendix and the plots into one folder
(`--out DIR`, a sweep's `report/`)."""

from __future__ import annotations

from pathlib import Path

from farm.analysis.limits import overrides_text
from farm.analysis.records import RunRecord
from farm.analysis.select import pct_text
from farm.errors import UserError
from farm.report.cost import gpu_time_by_trial
from farm.report.doc import Doc
from farm.report.layout import APPENDIX, PLOTS, REPORT
from farm.report.models import Report
from farm.report.text import _LIMIT_HEADERS, _int, _limit_cells, _num, definitions_section, rate_ranks, render, starts_table


def _trials(doc: Doc, report: Report) -> None:
    """Every trial on every profile: its runs, throughput, TPOT, success and eligibility."""
    sel = report.selection
    doc.h("Trials")
    doc.table(["Trial", "Engine", "Model", "Profile", "Runs", "Total TPS", "From totals", "Mean TPOT (ms)",
               "Success", "Eligible"],
              [[t.name or t.id, t.engine, t.model, t.profile, str(len(t.runs)), _num(t.total_tps), _num(t.tps_from_totals),
                _num(t.tpot_mean_ms), pct_text(t.success_rate) if t.success_rate is not None else "n/a",
                "yes" if t.eligible else f"no: {t.reason}"] for t in sel.trials])


# The seed's "Serving Benchmark Result" block: (metric, label, format); None starts a section.
_BLOCK: list[tuple[str | None, str, str]] = [
    ("successful_requests", "Successful requests:", ".0f"),
    ("max_concurrency", "Maximum request concurrency:", ".0f"),
    ("duration_s", "Benchmark duration (s):", ".2f"),
    ("total_input_tokens", "Total input tokens:", ".0f"),
    ("total_output_tokens", "Total generated tokens:", ".0f"),
    ("request_throughput", "Request throughput (req/s):", ".2f"),
    ("output_tps", "Output token throughput (tok/s):", ".2f"),
    ("peak_output_tps", "Peak output token throughput (tok/s):", ".2f"),
    ("peak_concurrency", "Peak concurrent requests:", ".2f"),
    ("total_tps", "Total Token throughput (tok/s):", ".2f"),
    ("guidellm_total_tps_mean", "guidellm mean token rate (tok/s):", ".2f"),
    ("slo_attainment", "SLO attainment (goodput):", ".3f"),
    ("goodput_rps", "Goodput (req/s):", ".2f"),
    (None, "Latency", ""),
    ("latency_mean_s", "Mean Latency(s):", ".2f"),
    ("latency_median_s", "Median Latency(s):", ".2f"),
    ("latency_p95_s", "P95 Latency(s):", ".2f"),
    ("latency_p99_s", "P99 Latency(s):", ".2f"),
    (None, "Time to First Token", ""),
    ("ttft_mean_ms", "Mean TTFT (ms):", ".2f"),
    ("ttft_median_ms", "Median TTFT (ms):", ".2f"),
    ("ttft_p95_ms", "P95 TTFT (ms):", ".2f"),
    ("ttft_p99_ms", "P99 TTFT (ms):", ".2f"),
    (None, "Time per Output Token (excl. 1st token)", ""),
    ("tpot_mean_ms", "Mean TPOT (ms):", ".2f"),
    ("tpot_median_ms", "Median TPOT (ms):", ".2f"),
    ("tpot_p95_ms", "P95 TPOT (ms):", ".2f"),
    ("tpot_p99_ms", "P99 TPOT (ms):", ".2f"),
    (None, "Inter-token Latency", ""),
    ("itl_mean_ms", "Mean ITL (ms):", ".2f"),
    ("itl_median_ms", "Median ITL (ms):", ".2f"),
    ("itl_p95_ms", "P95 ITL (ms):", ".2f"),
    ("itl_p99_ms", "P99 ITL (ms):", ".2f"),
]


def benchmark_block(rec: RunRecord) -> str:
    """One run in the seed's "Serving Benchmark Result" layout; metrics it lacks are left out, not invented."""
    lines = [" Serving Benchmark Result ".center(50, "=")]
    if not rec.measured:
        lines.append(f"status: {rec.status.value}" + (f" ({rec.reason})" if rec.reason else ""))
    for key, label, fmt in _BLOCK:
        if key is None:
            lines.append(label.center(50, "-"))
        elif key in rec.metrics:
            lines.append(f"{label:<41}{format(rec.metrics[key], fmt)}")
    lines.append("=" * 50)
    return "\n".join(lines)


def _runs(doc: Doc, report: Report) -> None:
    """Every run in the seed's Serving Benchmark Result block, with its backend parameters."""
    doc.h("Runs")
    for rec in report.results.records:
        doc.h3(f"{rec.id} ({rec.label}, {rec.profile}" + (f", repeat {rec.repeat}" if rec.repeat else "") + ")")
        doc.p(f"{rec.engine} {rec.model}, backend parameters:")
        doc.code("\n".join(rec.cli_flags) or "(none)")
        doc.code(benchmark_block(rec))


def _limits(doc: Doc, report: Report) -> None:
    """Each trial's knobs beside the limits its engine says it ran under, and the knobs it overrode."""
    seen: dict[str, object] = {}
    for rec in report.results.records:
        if rec.limits is not None:
            seen.setdefault(rec.trial, rec)
    if not seen:
        return
    doc.h("Effective limits (from the engine logs)")
    doc.table(["Trial", "Engine", "Flags", *_LIMIT_HEADERS, "Mamba cache", "Knobs overridden"],
              [[rec.label, rec.engine, " ".join(rec.flags), *_limit_cells(rec.limits),
                _int(rec.limits.mamba_cache_size), overrides_text(rec.limits)] for rec in seen.values()])


def render_appendix(report: Report, fmt: str = "markdown") -> str:
    """The appendix, as text or markdown; it names the report it belongs to."""
    doc = Doc(markdown=fmt == "markdown")
    doc.title(f"Appendix: {report.title}")
    doc.p(f"Every trial's row and every run's figures, for {doc.link(REPORT, REPORT)} beside it: the "
          f"recommendation and the tables its decisions rest on are there. Source: {report.results.source}.")
    for section in (definitions_section, _trials, starts_table, _limits, gpu_time_by_trial, rate_ranks, _runs):
        section(doc, report)
    return doc.text()


def write_report_files(report: Report, outdir: Path) -> list[Path]:
    """report.md, appendix.md and the plots (matplotlib loads here) into `outdir`; their paths."""
    from farm.report.plots import write_plots

    try:
        outdir.mkdir(parents=True, exist_ok=True)
        (outdir / REPORT).write_text(render(report, "markdown"))
        (outdir / APPENDIX).write_text(render_appendix(report, "markdown"))
    except OSError as exc:
        raise UserError(f"cannot write the report: {exc.strerror}", file=str(outdir)) from None
    return [outdir / REPORT, outdir / APPENDIX, *[Path(p) for p in write_plots(report, outdir / PLOTS)]]
