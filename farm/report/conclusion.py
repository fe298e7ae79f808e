"""The report's first screen and its reasons: the Conclusion (the recommended command, one line
per decision, the baseline's table), "Why this recommendation" (the primary profile's verdict in
words), and that verdict in one line for the end of a sweep."""

from __future__ import annotations

from farm.analysis.select import METRIC_LABELS, pct_text
from farm.report.capacity_text import capacity_line, ranking_of
from farm.report.cells import _ci_cell, _conf, _labels, _num, _signed, pretty_command
from farm.report.checks import _more, decision_text, gains_over_recommended, interval_text
from farm.report.doc import Doc as _Doc
from farm.report.energy_cost import conclusion_lines
from farm.report.layout import APPENDIX, PLOTS, THROUGHPUT_PLOT, lead_plot
from farm.report.models import Report
from farm.report.quality_text import quality_conclusion


def _conclusion(doc: _Doc, report: Report) -> None:
    """The truth first: the recommended command, then one line per decision (a winner with its
    interval, a proven equivalence, or what more runs would buy), then the evidence."""
    sel = report.selection
    rec = sel.recommended
    verdict = sel.verdict()
    margin = f"\u00b1{sel.equivalence_margin * 100:g} %"
    if sel.strategy == "best" and verdict is not None and verdict.recommended != verdict.leader \
            and verdict.recommended in verdict.equivalent:
        how = f"the simplest of the trials proven equivalent (within {margin}) to the best by"
    elif sel.strategy == "best":
        how = "the global best of what was measured: highest"
    else:
        how = (f"the stepwise replay of grid {doc.tick(sel.step_grid or '')}, each step kept only if it raises the")
    doc.h("Conclusion")
    if (capacity := capacity_line(report)) is not None:
        doc.p(f"Recommended configuration (the most load served under the SLO: {capacity}; "
              f"trial {doc.tick(rec.name or rec.trial)}):")
    else:
        # The floor the primary profile is judged by: its SLO's own where it sets one (farm/analysis/selection/rules.py).
        floor = report.success_floors.get(sel.primary_profile, sel.min_success_rate)
        doc.p(f"Recommended configuration ({how} {METRIC_LABELS[sel.metric]} on the {doc.tick(sel.primary_profile)} "
              f"profile among trials with a success rate of at least {pct_text(floor)}; "
              f"trial {doc.tick(rec.name or rec.trial)}):")
    doc.code(pretty_command(rec.command))
    _decisions(doc, report)
    if sel.baseline is None:
        doc.p("No baseline: no engine-default trial was measured.")
    else:
        b = sel.baseline
        doc.p(f"Benchmarks before and after (baseline {doc.tick(b.name or b.trial)}: {b.engine} {b.model} "
              f"{' '.join(b.flags) or 'without flags'}):")
        doc.table(["Profile", "Baseline total TPS", "Baseline mean TPOT (ms)", "Recommended total TPS", "Delta",
                   "Recommended mean TPOT (ms)", f"Delta {_conf(sel.alpha)} CI, Holm p, decision"],
                  [[r.profile, _num(r.baseline_total_tps), _num(r.baseline_tpot_mean_ms), _num(r.recommended_total_tps),
                    _signed(r.delta_pct), _num(r.recommended_tpot_mean_ms), _ci_cell(r.delta)] for r in sel.comparison])
        notes = [f"{r.profile}: {r.note}" for r in sel.comparison if r.note]
        notes += [f"{u.profile}: the {u.role} trial {doc.tick(u.trial)} has no number here: {u.reason}"
                  for u in sel.unmeasured]
        if notes:
            doc.items(notes)
    if lines := conclusion_lines(report, doc.tick):
        doc.p(" ".join(lines))
    if lines := quality_conclusion(report, doc.tick):
        doc.p(" ".join(lines))
    rate = report.rate_analysis
    if rate and rate.recommendation_changes:
        mine = {c.metric: c for c in rate.choices if c.strategy == sel.strategy}
        other, recorded = mine[rate.other_metric], mine["total_tps"]
        doc.p(f"Ranked by {METRIC_LABELS[rate.other_metric]} instead, the recommendation would be {doc.tick(other.trial)} "
              f"({other.value:.2f} tok/s against {_num(recorded.other_value)} for {doc.tick(recorded.trial)}): "
              f"{doc.tick(other.command)}; see \"Throughput: recorded vs {METRIC_LABELS[rate.other_metric]}\".")
    counts: dict[str, int] = {}
    for w in report.warnings:
        counts[w.code] = counts.get(w.code, 0) + 1
    if counts:
        doc.p("Before trusting these numbers, see the checks below: "
              + ", ".join(f"{doc.tick(c)} x{n}" for c, n in counts.items()) + ".")
    _companions(doc, report)


def _companions(doc: _Doc, report: Report) -> None:
    """The one plot that shows the answer, and where every trial's row and every run's figures are:
    beside report.md (`--out DIR`, a sweep's MLflow `report/`), never in it."""
    plot = lead_plot(report)
    alt = "total throughput by profile and trial" if plot.endswith(THROUGHPUT_PLOT) else "capacity by trial"
    doc.p(f"{doc.image_text(alt, plot)} Every trial's row and every run's figures: {doc.link(APPENDIX, APPENDIX)}, "
          f"beside this report with the plots in {doc.tick(PLOTS + '/')} ({doc.tick('--out DIR')} writes them; a sweep's MLflow "
          f"run keeps them under {doc.tick('report/')}, and each trial's run its guidellm JSON).")


def _why(doc: _Doc, report: Report) -> None:
    """The primary profile's verdict in words, right after the Conclusion: opened by a reader who
    asks why."""
    if report.selection.verdict() is None:
        return
    doc.h("Why this recommendation")
    _verdict_paragraph(doc, report)


def conclusion_decisions(report: Report, tick=lambda s: s) -> list[str]:
    """The Conclusion's lines, one per decision: the primary profile's verdict (the leader against the
    runner-up and the baseline, and the equivalence behind a simpler pick), the ordered steps (each
    against the step it builds on), and every trial another section shows better than the
    recommended one, on any profile (`gains_over_recommended`): none of them left to another section."""
    sel = report.selection
    name = _labels(report)
    t = lambda x: tick(name.get(x, x))  # noqa: E731
    gains = {(g.profile, frozenset((g.diff.a, g.diff.b))): g for g in gains_over_recommended(sel)}

    def against(profile: str, d) -> str:
        g = gains.pop((profile, frozenset((d.a, d.b))), None)
        if g is None:
            return ""
        rec = t(sel.recommended.trial)
        if profile == sel.primary_profile:
            return (f" - {t(g.trial)} is better than the recommended {rec} on the profile it was chosen for; the "
                    f"{sel.strategy} strategy recommends {rec} all the same")
        return (f" - {t(g.trial)} is better than the recommended {rec} here; the recommendation is for "
                f"{tick(sel.primary_profile)}")

    lines: list[str] = []
    v = sel.verdict()
    if v is not None and ranking_of(sel, v.profile) is None:
        for c in v.comparisons:
            role = ", ".join(c.roles).replace("_", "-")
            lines.append(f"{tick(v.profile)} ({role}): {decision_text(c, t, sel.alpha)}{against(v.profile, c)}")
    for s in sel.steps:
        if s.delta is None:
            continue
        adds = f"adds {', '.join(tick(f) for f in s.added_flags)}" if s.added_flags else "its engine on defaults"
        lines.append(f"step {t(s.trial or s.step)} ({adds}; {s.verdict} by the stepwise replay): "
                     f"{decision_text(s.delta, t, sel.alpha)}{against(sel.primary_profile, s.delta)}")
    for (profile, _), g in list(gains.items()):
        lines.append(f"{tick(profile)} (from \"{g.section}\"): {decision_text(g.diff, t, sel.alpha)}"
                     f"{against(profile, g.diff)}")
    return lines


def _decisions(doc: _Doc, report: Report) -> None:
    sel = report.selection
    lines = conclusion_decisions(report, doc.tick)
    if not lines:
        return
    doc.p(f"Decisions (\u03b1 = {sel.alpha:g}; Welch on log throughput, Holm within each family; equivalent: the "
          f"{(1 - 2 * sel.alpha) * 100:g} % interval of the ratio inside \u00b1{sel.equivalence_margin * 100:g} %):")
    doc.items(lines)


def _verdict_paragraph(doc: _Doc, report: Report) -> None:
    """The primary profile's decision in words: why this recommendation, with the intervals behind it."""
    sel = report.selection
    v = sel.verdict()
    if v is None:
        return
    if (ranking := ranking_of(sel, v.profile)) is not None:  # capacity: the search's evidence, not a t-test
        doc.p(f"Evidence: {ranking.reason}; see \"Capacity under the SLO\".")
        return
    name = _labels(report)
    tick = lambda t: doc.tick(name.get(t, t))  # noqa: E731
    margin = f"\u00b1{v.margin * 100:g} %"
    family = f"\u03b1 = {v.alpha:g}, Welch on log throughput, Holm over {sum(1 for c in v.comparisons if c.roles != ['recommended'])} comparison(s)"
    lead = v.comparisons[0] if v.comparisons else None
    simpler = ""
    if v.recommended != v.leader and v.recommended in v.equivalent:
        simpler = (f" The simplest of the trials equivalent to the leader within {margin}, {tick(v.recommended)} "
                   f"({v.complexity.get(v.recommended, 0)} non-default choices against {v.complexity.get(v.leader, 0)} "
                   f"for {tick(v.leader)}), is recommended: extra flags that buy less than the margin are not worth "
                   f"carrying.")
    if v.decision == "winner":
        text = (f"Evidence: {tick(v.winner)} wins on {doc.tick(v.profile)}: it is better than the runner-up "
                f"{tick(v.runner_up)}, {interval_text(lead, decided=False)} ({family}).{simpler}")
    elif v.decision == "equivalent":
        text = (f"Evidence: on {doc.tick(v.profile)} the leader {tick(v.leader)} and the runner-up {tick(v.runner_up)} "
                f"are the same within {margin} (equivalent: {interval_text(lead, decided=False)}; {family}).{simpler}")
        if v.recommended == v.leader:
            text += f" The leader {tick(v.leader)} is also the simplest of them, and is recommended."
    elif v.decision == "undecided":
        more = (f"{_more(lead.more_runs)} each would decide it at the current noise" if lead.more_runs is not None
                else "no number of runs would decide it at the current noise")
        text = (f"Evidence: not decided yet on {doc.tick(v.profile)}: {tick(v.leader)} leads {tick(v.runner_up)} by "
                f"{interval_text(lead, decided=False)} ({family}), neither a significant difference nor the same within "
                f"{margin}; {more} (`--repeats auto` runs until each decision is made). The leader by mean is "
                f"recommended.{simpler}")
    elif v.decision == "cannot_tell":
        cmp_text = "; ".join(f"{tick(c.a)} vs {tick(c.b)}: {interval_text(c)}" for c in v.comparisons)
        text = (f"Evidence: cannot tell on {doc.tick(v.profile)}: with a single run per trial there is no interval and "
                f"no test; {tick(v.leader)} leads by its mean alone, unconfirmed ({cmp_text}).")
    else:
        text = f"Evidence: {tick(v.leader)} is the only eligible trial on {doc.tick(v.profile)}; there is nothing to compare."
    if sel.strategy == "stepwise" and v.recommended != sel.recommended.trial:
        text += (f" The stepwise replay recommends {tick(sel.recommended.trial)}; the statistics above are for the best "
                 "of all trials.")
    cp = sel.cross_profile
    if cp is not None and cp.recommended is not None:
        same = "the same configuration" if cp.recommended == sel.recommended.trial else doc.tick(name.get(cp.recommended, cp.recommended))
        text += (f" One command for all {len(cp.profiles)} profiles (best worst case over the baseline): {same}; see "
                 "\"One command for all workloads\".")
    doc.p(text)
    if sel.sequential:
        doc.p(f"These runs come from `--repeats auto`, which looks at the data after every pass and stops when every "
              f"decision is made. Such optional stopping inflates the chance of a false decision, so the looks share "
              f"a 5 % chance of one by an O'Brien-Fleming-type \u03b1-spending rule (Lan-DeMets, over the looks the "
              f"run budget plans: strict at the first, near 5 % at the last); the decisions here are judged at "
              f"\u03b1 = {sel.alpha:.3g}, the level of the last look these runs reached.")


def verdict_line(report: Report) -> str | None:
    """The primary profile's verdict in one line (the end of a sweep prints it under the command)."""
    sel = report.selection
    v = sel.verdict()
    if v is None:
        return None
    if (ranking := ranking_of(sel, v.profile)) is not None:
        return ranking.reason
    name = _labels(report)
    runs = {t.id: t.repeats for t in sel.trials if t.profile == v.profile}
    lead = v.comparisons[0] if v.comparisons else None
    n = f"{runs.get(v.leader, 0)} vs {runs.get(v.runner_up, 0)} runs" if v.runner_up else ""
    margin = f"\u00b1{v.margin * 100:g} %"
    simpler = (f"; recommending the simplest equivalent trial, {name[v.recommended]}"
               if v.recommended != v.leader and v.recommended in v.equivalent else "")
    if v.decision == "winner":
        return (f"{name[v.winner]} wins on {v.profile}: {interval_text(lead, decided=False)} over the runner-up "
                f"{name[v.runner_up]} ({n}, \u03b1 = {v.alpha:g}){simpler}")
    if v.decision == "equivalent":
        return (f"equivalent on {v.profile}: {name[v.leader]} and {name[v.runner_up]} are the same within {margin} "
                f"({interval_text(lead, decided=False)}; {n}, \u03b1 = {v.alpha:g}){simpler}")
    if v.decision == "undecided":
        more = f"; {_more(lead.more_runs)} each would decide it" if lead.more_runs is not None else ""
        return (f"not decided yet on {v.profile}: {name[v.leader]} leads {name[v.runner_up]} by "
                f"{interval_text(lead, decided=False)} ({n}, \u03b1 = {v.alpha:g}), neither different nor the same "
                f"within {margin}{more}; recommending the leader by mean{simpler}")
    if v.decision == "cannot_tell":
        return f"cannot tell on {v.profile}: single runs give no interval; {name[v.leader]} leads by its mean alone"
    return f"{name[v.leader]} is the only eligible trial on {v.profile}"
