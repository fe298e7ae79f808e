"""What the sweep's MLflow run and the terminal show of a report: the run's description (its
summary in markdown), the per-profile numbers of the recommendation and the baseline, warnings
grouped by code, and each trial's verdict."""

from __future__ import annotations

from farm.analysis.outcome import NOT_MEASURED
from farm.analysis.records import RunRecord
from farm.report.capacity_text import capacity_line, ranking_of
from farm.report.checks import interval_text
from farm.report.doc import Doc as _Doc
from farm.report.models import Report
from farm.report.energy_cost import conclusion_lines
from farm.report.layout import APPENDIX, PLOTS
from farm.report.text import _ci_cell, _conf, _labels, _num, _signed, conclusion_decisions


def summary_markdown(report: Report, *, heading: str | None = None, gpu_hours: float | None = None,
                     report_path: str | None = None, gpu_model: str | None = None) -> str:
    """The answer in a page (the sweep's MLflow run description): the recommended command, the
    verdict per profile with its interval, the baseline and engine comparisons, what failed, and
    GPU-hours when given. The whole report stays in `report_path`."""
    sel = report.selection
    rec = sel.recommended
    name = _labels(report)
    doc = _Doc(markdown=True)
    doc.h(heading or report.title)
    what = capacity_line(report) or f"{_num(rec.total_tps)} total tok/s on `{sel.primary_profile}`"
    doc.p(f"**Recommended** (trial `{rec.name or rec.trial}`, {what}):")
    doc.code(rec.command)
    # the report's first screen: each decision in a line, then cost and energy against the baseline
    decisions = conclusion_decisions(report, lambda s: f"`{s}`")
    if decisions:
        doc.p(f"**Decisions** (\u03b1 = {sel.alpha:g}):")
        doc.items(decisions)
    for line in conclusion_lines(report, lambda s: f"`{s}`"):
        doc.p(line)
    rows = []
    for v in sel.verdicts:
        lead = v.comparisons[0] if v.comparisons else None
        ranking = ranking_of(sel, v.profile)
        if ranking is not None:  # capacity: the search's intervals, not a difference of means
            cells = [f"{name.get(r.trial, r.trial)} {r.interval}" for r in ranking.rows if r.capacity is not None][:2]
            versus = "capacity " + " vs ".join(cells)
        else:
            versus = f"vs {name.get(lead.b, lead.b)}: {interval_text(lead)}" if lead is not None else "nothing to compare"
        rows.append([v.profile, v.decision.replace("_", " "), name.get(v.recommended, v.recommended), versus])
    if rows:
        doc.p(f"**Verdict per profile** (\u03b1 = {sel.alpha:g}):")
        doc.table(["Profile", "Verdict", "Recommended there", "Lead (CI)"], rows)
    if sel.baseline is None:
        doc.p("No baseline: no engine-default trial was measured.")
    elif sel.comparison:
        b = sel.baseline
        doc.p(f"**Against the baseline** `{b.name or b.trial}`:")
        doc.table(["Profile", "Baseline tok/s", "Recommended tok/s", "Delta", f"{_conf(sel.alpha)} CI, Holm p",
                   "Baseline TPOT ms", "Recommended TPOT ms"],
                  [[r.profile, _num(r.baseline_total_tps), _num(r.recommended_total_tps), _signed(r.delta_pct),
                    _ci_cell(r.delta), _num(r.baseline_tpot_mean_ms), _num(r.recommended_tpot_mean_ms)]
                   for r in sel.comparison])
    if len(sel.engines) > 1:
        doc.p(f"**Engines on defaults** (`{sel.engine_comparison_profile}`):")
        doc.table(["Engine", "Trial", "Total tok/s", "Mean TPOT ms", "Eligible"],
                  [[e.engine, name.get(e.trial, e.trial), _num(e.total_tps), _num(e.tpot_mean_ms),
                    "yes" if e.eligible else "no"] for e in sel.engines])
        lead = sel.engine_lead
        if lead:
            doc.p(f"{lead.leader} leads {lead.runner_up} by {lead.total_tps_ahead_pct:.1f} %.")
    _failed_and_unmeasured(doc, report)
    if gpu_hours is not None:
        doc.p(f"**GPU-hours**: {gpu_hours:.2f}" + (f" ({gpu_model})" if gpu_model else ""))
    counts: dict[str, int] = {}
    for w in report.warnings:
        counts[w.code] = counts.get(w.code, 0) + 1
    if counts:
        doc.p("Checks: " + ", ".join(f"`{c}` x{n}" for c, n in counts.items()) + ".")
    if report_path:
        # the appendix and the plots sit beside it (farm/report/layout.py)
        beside = report_path.rsplit("/", 1)[0] + "/" if "/" in report_path else ""
        doc.p(f"The whole report: `{report_path}` (artifacts); every trial's row and every run's figures beside it in "
              f"`{beside}{APPENDIX}`, the plots in `{beside}{PLOTS}/`.")
    return doc.text()


def _failed_and_unmeasured(doc: _Doc, report: Report) -> None:
    """The summary's "Not measured" and "Failed" lines: each trial once, by its first such run."""
    failed: dict[str, RunRecord] = {}
    unmeasured: dict[str, RunRecord] = {}
    for r in report.results.records:
        # a capacity search's run past the capacity (a time limit, failed requests) is a point of its curve
        if r.status in NOT_MEASURED:
            unmeasured.setdefault(r.trial, r)
        elif r.status.value != "ok" and (r.load is None or r.status.value in ("engine_crashed", "oom")):
            failed.setdefault(r.trial, r)
    if unmeasured:
        doc.p(f"**Not measured** ({len(unmeasured)} trial(s)):")
        doc.items([f"`{r.label}`: {r.status.value}" + (f": {r.reason[:300]}" if r.reason else "")
                   for r in unmeasured.values()])
    if failed:
        doc.p(f"**Failed** ({len(failed)} trial(s)):")
        doc.items([f"`{r.label}`: {r.status.value}" + (f": {r.reason[:200]}" if r.reason else "") for r in failed.values()])
    else:
        doc.p("**Failed**: none.")


def profile_numbers(report: Report) -> dict[str, dict[str, dict[str, float]]]:
    """Profile -> {"recommended": {...}, "baseline": {...}} of mean total_tps and tpot_mean_ms
    (what the sweep's run carries as metrics, and `farm sweep --json` prints); a side that was
    not measured on a profile is left out."""
    sel = report.selection
    roles = {"recommended": sel.recommended.trial, "baseline": sel.baseline.trial if sel.baseline else None}
    out: dict[str, dict[str, dict[str, float]]] = {}
    for t in sel.trials:
        for role, trial in roles.items():
            if trial == t.id:
                values = {k: v for k, v in (("total_tps", t.total_tps), ("tpot_mean_ms", t.tpot_mean_ms)) if v is not None}
                if values:
                    out.setdefault(t.profile, {})[role] = values
    return out


# Warnings about single runs: grouped as "N of M runs"; their `size` unit for the worst case.
_RUN_CODES = {"rate_mismatch": "{:.1f} % apart", "tpot_inconsistent": "{:.0f} % apart",
              "itl_zero": None}


def warning_groups(report: Report) -> list[str]:
    """One line per warning code: how many, of how many runs where it is about runs, and the worst
    case ("tpot_inconsistent: 4 of 8 runs, worst 105 % apart"); the report holds each one."""
    runs = sum(1 for r in report.results.records if r.measured)
    lines = []
    for code in dict.fromkeys(w.code for w in report.warnings):
        group = [w for w in report.warnings if w.code == code]
        sized = [w for w in group if w.size is not None]
        if code in _RUN_CODES:
            line = f"{code}: {len(group)} of {runs} runs"
            if sized and _RUN_CODES[code]:
                worst = max(sized, key=lambda w: w.size)
                line += f", worst {_RUN_CODES[code].format(worst.size)} ({worst.trial}, {worst.profile})"
        elif len(group) == 1:
            line = f"{code}: {group[0].message}"
        else:
            line = f"{code}: {len(group)} warnings, e.g. {group[0].message}"
        lines.append(line)
    return lines


def trial_verdicts(report: Report) -> dict[str, str]:
    """Trial id -> what selection made of it on the primary profile, in a few words (a child run's tag)."""
    sel = report.selection
    v = sel.verdict()
    out: dict[str, str] = {}
    for t in sel.trials:
        if t.profile != sel.primary_profile:
            continue
        if t.id == sel.recommended.trial:
            out[t.id] = f"recommended ({v.decision.replace('_', ' ')})" if v is not None else "recommended"
        elif not t.eligible:
            out[t.id] = f"not eligible: {t.reason}"
        elif v is not None and t.id in v.equivalent:
            out[t.id] = f"equivalent to the leader within \u00b1{v.margin * 100:g} %"
        elif t.node_control_of:
            out[t.id] = f"node control of {t.node_control_of}"
        else:
            out[t.id] = "below the leader"
    return out


