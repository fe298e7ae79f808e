"""The report's "Capacity under the SLO" section: each trial's capacity, ranked, and its curve."""

from __future__ import annotations

from farm.report.doc import Doc
from farm.report.models import Report


def _n(x: float | None, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


def ranking_of(sel, profile: str):
    """The capacity ranking of `profile`, or None for a profile of fixed load."""
    return next((c for c in sel.capacity if c.profile == profile), None)


def capacity_line(report: Report) -> str | None:
    """The recommendation in capacity terms, when the primary profile is a capacity profile."""
    sel = report.selection
    ranking = ranking_of(sel, sel.primary_profile)
    row = ranking.row(ranking.recommended) if ranking and ranking.recommended else None
    if row is None:
        return None
    return (f"capacity {row.capacity:g} {ranking.unit} {row.interval} under the SLO of {ranking.profile}, "
            f"{_n(row.total_tps)} total tok/s there")


def capacity_section(doc: Doc, report: Report) -> None:
    sel = report.selection
    for ranking in sel.capacity:
        doc.h(f"Capacity under the SLO: {ranking.profile}")
        slo = report.slo.get(ranking.profile)
        doc.p(f"The most {ranking.over} ({ranking.unit}) each trial serves while its runs meet the SLO"
              + (f" ({slo.removesuffix(' (mean over the repeats)')})" if slo else "")
              + ": a ladder of loads, then bisection between the highest load that met it and the lowest that "
              "broke it. The interval runs from the capacity to the lowest load that broke the SLO.")
        doc.p(f"Verdict ({ranking.decision}): {ranking.reason}.")
        doc.table(["Trial", f"Capacity ({ranking.unit})", "Interval", "Total tok/s there", "Req/s there",
                   "Goodput req/s", "Runs", "Search ended"],
                  [[r.label + (" (recommended)" if r.trial == ranking.recommended else ""),
                    _n(r.capacity, "g") if r.capacity is not None else "none", r.interval, _n(r.total_tps),
                    _n(r.request_rate, ".2f"), _n(r.goodput_rps, ".2f"), str(r.runs), r.why_stopped]
                   for r in ranking.rows])
        for r in ranking.rows:
            if r.misses_at_lowest:
                doc.p(f"{doc.tick(r.label)} misses the SLO at the lowest load: " + "; ".join(r.misses_at_lowest) + ".")
        doc.h3(f"Curves ({ranking.profile}: every load tried)")
        doc.table(["Trial", "Load", "Meets SLO", "P95 TTFT ms", "Mean TPOT ms", "Success", "Total tok/s", "Req/s",
                   "What it broke"],
                  [[r.label, f"{p.load:g}", "yes" if p.meets else "no", _n(p.ttft_p95_ms), _n(p.tpot_mean_ms, ".2f"),
                    "-" if p.success_rate is None else f"{p.success_rate:.0%}", _n(p.total_tps), _n(p.request_rate, ".2f"),
                    "; ".join(p.misses) or "-"]
                   for r in ranking.rows for p in r.curve])
