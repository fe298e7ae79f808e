"""The report's "Cost and energy per million tokens" section, and the Conclusion's lines of it
(farm/analysis/cost.py computes; this only formats)."""

from __future__ import annotations

from farm.analysis.cost import HOW_TO_PRICE, Amount, Costs, ProfileCost
from farm.report.doc import Doc
from farm.report.models import Report

WH = 3600.0  # joules in a watt-hour


def usd(value: float | None) -> str:
    return "-" if value is None else f"${value:.4g}" if value < 100 else f"${value:,.0f}"


def _amount(a: Amount | None, fmt, unit_scale: float = 1.0) -> str:
    if a is None:
        return "-"
    text = fmt(a.value / unit_scale)
    if a.low is not None or a.high is not None:
        low = fmt(a.low / unit_scale) if a.low is not None else "?"
        high = fmt(a.high / unit_scale) if a.high is not None else "unbounded"
        text += f" [{low}, {high}]"
    return text


def _wh(value: float) -> str:
    return f"{value:.4g}"


def prices_text(costs: Costs) -> str:
    return ", ".join(f"{k} ${v:g}" for k, v in costs.prices.items()) + " per GPU-hour"


def not_priced_line(costs: Costs | None) -> str:
    return f"Costs are not computed: no price given; {HOW_TO_PRICE}."


def _tokens_per_j(pc: ProfileCost, which: str) -> str:
    a = pc.j_per_m_output if which == "output" else pc.j_per_m_total
    return "-" if a is None else f"{1e6 / a.value:.3g}"


def conclusion_lines(report: Report, tick=lambda s: s) -> list[str]:
    """Cost and energy per million tokens of the recommended trial against the baseline (and a local
    search's start), on the primary profile: what the Conclusion says of them, in a line or two."""
    costs = report.costs
    if costs is None:
        return []
    sel = report.selection
    primary = sel.primary_profile
    who = [("recommended", sel.recommended.trial)]
    if sel.baseline is not None and sel.baseline.trial != sel.recommended.trial:
        who.append(("baseline", sel.baseline.trial))
    for note in report.local_search:
        start = note.plan.start
        if start not in {t for _, t in who}:
            who.append(("your start command", start))
    parts_usd, parts_j = [], []
    for role, trial in who:
        tc = costs.trial(trial)
        pc = next((p for p in tc.profiles if p.profile == primary), None) if tc else None
        if pc is None:
            continue
        if costs.priced:
            parts_usd.append(f"{role} {_amount(pc.usd_per_m_total, usd)}" if pc.usd_per_m_total
                             else f"{role} not priced ({tc.not_priced})")
        parts_j.append(f"{role} {_amount(pc.j_per_m_total, _wh, WH)} Wh" if pc.j_per_m_total
                       else f"{role} not measured ({pc.energy_not_measured or 'no run measured'})")
    lines = []
    if costs.priced and parts_usd:
        lines.append(f"Dollars per million tokens (prompt + output) on {tick(primary)}, at {prices_text(costs)}: "
                     + "; ".join(parts_usd) + ".")
    elif not costs.priced:
        lines.append(not_priced_line(costs))
    why = {p.split(" not measured ", 1)[1] for p in parts_j if " not measured " in p}
    if len(parts_j) > 1 and len(why) == 1 and all(" not measured " in p for p in parts_j):
        lines.append(f"Energy per million tokens on {tick(primary)}: not measured for "
                     f"{' or '.join(p.split(' not measured ', 1)[0] for p in parts_j)} {why.pop()}.")
    elif parts_j:
        lines.append(f"Energy per million tokens (prompt + output) on {tick(primary)}, the GPUs' own: "
                     + "; ".join(parts_j) + ".")
    return lines


def energy_cost_section(doc: Doc, report: Report) -> None:
    costs = report.costs
    if costs is None or not costs.trials:
        return
    sel = report.selection
    doc.h("Cost and energy per million tokens")
    conf = f"{costs.confidence * 100:g} %"
    if costs.priced:
        doc.p(f"Prices: {prices_text(costs)} (the study's `prices` or --price; farm looks nothing up). Dollars per "
              f"million tokens = price x GPUs / (tokens per second x 3600) x 1e6, at each trial's mean output and "
              f"total throughput over its runs, with the throughput's {conf} interval carried over; at its SLO "
              f"capacity where its profile searches one.")
    else:
        doc.p(not_priced_line(costs))
    doc.p(f"Energy: the GPUs' own (NVML power integrated over each run's window), as tokens per joule and watt-hours "
          f"per million tokens (mean [{conf} CI] over the runs whose energy was measured).")
    keep = {sel.recommended.trial, *([sel.baseline.trial] if sel.baseline else [])}
    rows, capacity = [], any(pc.capacity_load is not None for tc in costs.trials for pc in tc.profiles)
    energy = any(pc.energy_runs for tc in costs.trials for pc in tc.profiles)
    unmeasured: dict[str, int] = {}
    for tc in costs.trials:
        for pc in tc.profiles:
            if pc.profile != sel.primary_profile and tc.trial not in keep:
                continue
            if pc.energy_not_measured:
                unmeasured[pc.energy_not_measured] = unmeasured.get(pc.energy_not_measured, 0) + 1
            row = [doc.tick(tc.label), pc.profile]
            if costs.priced:
                row += [_amount(pc.usd_per_m_output, usd), _amount(pc.usd_per_m_total, usd)]
                if capacity:
                    row.append(usd(pc.usd_per_m_total_at_capacity) if pc.capacity_load is not None else "-")
            if energy:  # no run measured its energy: no column of dashes (the line below says why)
                row += [_tokens_per_j(pc, "output"), _tokens_per_j(pc, "total"),
                        _amount(pc.j_per_m_total, _wh, WH), str(pc.energy_runs)]
            if any(cell not in ("-", "0") for cell in row[2:]):  # a trial with nothing measured has no row
                rows.append(row)
    head = ["Trial", "Profile"]
    if costs.priced:
        head += ["$ / M output tokens", "$ / M total tokens"] + (["$ / M total at SLO capacity"] if capacity else [])
    if energy:
        head += ["Output tokens / J", "Total tokens / J", "Wh / M total tokens", "Runs with energy"]
    if rows:
        doc.p(f"Every trial on {doc.tick(sel.primary_profile)}; the recommended and the baseline on every profile:")
        doc.table(head, rows)
    else:  # no price and no energy: a table of dashes says nothing the lines below do not
        doc.p("No trial has a price or a measured energy: no table.")
    if unmeasured:
        doc.items([f"energy not measured ({n} trial-profile(s)): {why}" for why, n in unmeasured.items()])
    measured = {row.id for row in sel.trials if row.total_tps is not None}
    not_priced: dict[str, list[str]] = {}
    for tc in costs.trials:
        if costs.priced and tc.not_priced and tc.trial in measured:
            not_priced.setdefault(tc.not_priced, []).append(doc.tick(tc.label))
    if not_priced:
        doc.items([f"not priced: {', '.join(who)}: {why}" for why, who in not_priced.items()])
    if costs.sweep:
        parts = []
        for s in costs.sweep:
            what = f"{s.gpu_hours:.3f} GPU-hours" + (f" of {s.accelerator}" if s.accelerator else "")
            parts.append(f"{what}: {usd(s.usd)}" if s.usd is not None else f"{what}: not priced")
        total = sum(s.usd for s in costs.sweep if s.usd is not None)
        priced = all(s.usd is not None for s in costs.sweep)
        doc.p("What the sweep itself cost (every trial's GPUs from its start to its end: engine starts, warm-up, "
              "runs, failures and farm's own; see \"GPU time\"): " + "; ".join(parts)
              + (f"; {usd(total)} in all." if priced and len(costs.sweep) > 1 else "."))
