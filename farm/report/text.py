"""Rendering a report: text and markdown in the seed's shape, and the JSON object."""

from __future__ import annotations

import json
import shlex
from typing import Any, Callable

from farm.analysis.definitions import definitions_table
from farm.analysis.records import Provenance, RunRecord
from farm.analysis.select import (
    METRIC_LABELS,
    STAT_LABELS,
    STAT_METRICS,
    pct_text,
)
from farm.engines import ENGINES
from farm.errors import UserError
from farm.report.capacity_text import capacity_line, capacity_section, ranking_of
from farm.report.checks import _fmt_pct, _more, decision_text, decision_word, gains_over_recommended, interval_text
from farm.report.cost import gpu_time_section
from farm.report.energy_cost import conclusion_lines, energy_cost_section
from farm.report.layout import APPENDIX, PLOTS, THROUGHPUT_PLOT, appendix_ref, lead_plot
from farm.report.quality_text import quality_cell, quality_conclusion, quality_json, quality_section
from farm.report.search import search_json, search_sections
from farm.report.doc import Doc as _Doc
from farm.report.engines import engine_matchups_section
from farm.report.models import RATE_TOLERANCE, Report

# --------------------------------------------------------------------------------------
# JSON


def report_json(report: Report) -> dict[str, Any]:
    """The object of `farm analyze --format json` (issue 3 point 3, plus the tables behind it)."""
    sel = report.selection
    rec = sel.recommended
    trials = [t.model_dump(include={"id", "name", "engine", "model", "flags", "profile", "total_tps", "tps_from_totals",
                                    "tpot_mean_ms", "success_rate", "repeats", "runs", "eligible", "reason", "stats",
                                    "nodes", "node_control_of", "slo_broken"})
              for t in sel.trials]
    return {
        "source": report.results.source,
        "strategy": sel.strategy,
        "metric": sel.metric,
        "primary_profile": sel.primary_profile,
        "min_success_rate": sel.min_success_rate,
        "recommended": {"command": rec.command, "trial": rec.trial, "name": rec.name, "engine": rec.engine,
                        "model": rec.model, "flags": rec.flags, "total_tps": rec.total_tps},
        "baseline": sel.baseline.model_dump() if sel.baseline else None,
        "best_trial": sel.best_trial,
        "stepwise_trial": sel.stepwise_trial,
        "trials": trials,
        "comparison": [r.model_dump() for r in sel.comparison],
        "unmeasured": [u.model_dump() for u in sel.unmeasured],
        "engines": [e.model_dump() for e in sel.engines],
        "engine_lead": sel.engine_lead.model_dump() if sel.engine_lead else None,
        "engine_matchups": [m.model_dump() for m in sel.engine_matchups],
        "steps": [s.model_dump() for s in sel.steps],
        "warnings": [w.model_dump(include={"code", "trial", "profile", "message"}) for w in report.warnings],
        "notes": list(report.notes),
        "definitions": [{"name": n, "keys": k, "meaning": m, "source": src} for n, k, m, src in definitions_table()],
        "rate_analysis": report.rate_analysis.model_dump() if report.rate_analysis else None,
        "gpu_time": report.gpu_time.model_dump() if report.gpu_time else None,
        "costs": report.costs.model_dump() if report.costs else None,
        # issue 7: the evidence behind the recommendation
        "alpha": sel.alpha,
        "sequential": sel.sequential,
        "equivalence_margin": sel.equivalence_margin,
        "verdicts": [v.model_dump() for v in sel.verdicts],
        "cross_profile": sel.cross_profile.model_dump() if sel.cross_profile else None,
        "nodes": sel.nodes.model_dump() if sel.nodes else None,
        "pareto": sel.pareto,
        "edges": [e.model_dump() for e in sel.edges],
        "unseparated": sel.unseparated,
        "capacity": [c.model_dump() for c in sel.capacity],
        **search_json(report),
        **quality_json(report),
    }


# --------------------------------------------------------------------------------------
# text and markdown


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "n/a" if x is None else format(x, fmt)


def _signed(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f} %"


def pretty_command(command: str) -> str:
    """One flag per line, as the seed prints its serve command."""
    try:
        args = shlex.split(command)
    except ValueError:
        return command
    head = [a for a in args[: next((i for i, a in enumerate(args) if a.startswith("--")), len(args))]]
    # A flag and the values that follow it share a line (`--model-path Qwen/Qwen3`, SGLang's form):
    # a line per token broke every value from its flag.
    lines: list[list[str]] = []
    for arg in args[len(head):]:
        if arg.startswith("-") or not lines:
            lines.append([arg])
        else:
            lines[-1].append(arg)
    return " \\\n    ".join([shlex.join(head)] + [shlex.join(line) for line in lines])


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


def _conf(alpha: float) -> str:
    return f"{(1 - alpha) * 100:g} %"


def _ci_cell(d) -> str:
    if d is None:
        return "n/a"
    if d.ci_low_pct is None or d.ci_high_pct is None:  # why there is no interval, where it is known
        return "n/a (single runs)" if min(d.n_a, d.n_b) < 2 else f"n/a ({d.note})" if d.note else "n/a"
    if d.decision:
        mark = f" ({decision_word(d)})"
    else:
        mark = "" if d.significant is None else (" (significant)" if d.significant else " (not significant)")
    return f"[{d.ci_low_pct:+.2f}, {d.ci_high_pct:+.2f}] %, p = {d.p_holm:.3g}{mark}"


def _labels(report: Report) -> dict[str, str]:
    return {t.id: t.name or t.id for t in report.selection.trials}


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


def _cross(doc: _Doc, report: Report) -> None:
    """One command across workloads: best worst case over the baseline, and what it costs per profile."""
    cp = report.selection.cross_profile
    if cp is None:
        return
    name = _labels(report)
    doc.h("One command for all workloads")
    if cp.recommended is None:
        doc.p(f"No trial is eligible on every profile ({', '.join(cp.profiles)}), so none can serve them all.")
        return
    doc.p(f"The configuration with the best worst-case total throughput relative to the baseline "
          f"{doc.tick(name.get(cp.baseline, cp.baseline))} over {', '.join(doc.tick(p) for p in cp.profiles)} is "
          f"{doc.tick(name.get(cp.recommended, cp.recommended))}: at worst {_fmt_pct(cp.worst_case_pct)} "
          f"(on {doc.tick(cp.worst_profile or '')}), geometric mean {_fmt_pct(cp.geomean_pct)}:")
    doc.code(pretty_command(cp.command or ""))
    doc.p("What it costs on each profile against that profile's own recommendation:")
    doc.table(["Profile", "Profile's pick", "Its total TPS", "This command's total TPS", "vs baseline",
               f"Cost vs profile's pick ({_conf(report.selection.alpha)} CI, Holm p)"],
              [[c.profile, name.get(c.winner, c.winner), _num(c.winner_total_tps), _num(c.total_tps),
                _fmt_pct(c.vs_baseline_pct), "none: it is the pick" if c.cost.a == c.cost.b else interval_text(c.cost)]
               for c in cp.costs])
    if cp.profiles_left_out:
        doc.p(f"Left out (no eligible baseline there): {', '.join(cp.profiles_left_out)}.")
    rows = [r for r in cp.ranking if r.comparable][:8]
    if len(rows) > 1:
        doc.p("Ranking by worst case (then geometric mean) over the baseline:")
        doc.table(["Trial", "Worst case", "On", "Geometric mean"],
                  [[name.get(r.trial, r.trial), _fmt_pct(r.worst_case_pct), r.worst_profile or "", _fmt_pct(r.geomean_pct)]
                   for r in rows])
    others = [r for r in cp.ranking if not r.comparable]
    if others:
        doc.p(f"{len(others)} trial(s) are not eligible or not measured on every profile and cannot serve them all.")


def _stat_cell(t, metric: str) -> str:
    st = t.stats.get(metric)
    if st is None:
        return "n/a"
    if st.ci_low is None:
        return f"{st.mean:.2f}"
    return f"{st.mean:.2f} [{st.ci_low:.2f}, {st.ci_high:.2f}]"


def _evidence(doc: _Doc, report: Report) -> None:
    """Per profile: every trial's mean and interval of the four metrics, and the verdict."""
    sel = report.selection
    if not any(t.stats for t in sel.trials):
        return
    conf = f"{_conf(sel.alpha)}"
    doc.h(f"Intervals and verdicts (mean [{conf} CI] over the repeats)")
    by_profile: dict[str, list] = {}
    for t in sel.trials:
        by_profile.setdefault(t.profile, []).append(t)
    verdicts = {v.profile: v for v in sel.verdicts}
    name = _labels(report)
    # A trial with no run on a profile has no number in its table: said once below, not once per profile.
    unmeasured: dict[tuple[str, str], list[str]] = {}
    for t in sel.trials:
        if not t.repeats and t.total_tps is None:
            unmeasured.setdefault((t.name or t.id, t.reason or "not measured"), []).append(t.profile)
    for profile, trials in by_profile.items():
        doc.h3(profile)
        front = set(sel.pareto.get(profile, []))
        trials = sorted((t for t in trials if t.repeats or t.total_tps is not None), key=lambda t: -(t.total_tps or -1))
        gated = bool(report.results.quality)  # the quality gate's column, where the study has one
        doc.table(["Trial", "Runs", *[STAT_LABELS[m] for m in STAT_METRICS], "Pareto", *(["Quality"] if gated else []),
                   "Eligible"],
                  [[t.name or t.id, str(t.repeats), *[_stat_cell(t, m) for m in STAT_METRICS],
                    "yes" if t.id in front else "", *([quality_cell(report, t.id)] if gated else []),
                    "yes" if t.eligible else f"no: {t.reason}"] for t in trials])
        v = verdicts.get(profile)
        if v is not None:
            doc.p(f"Verdict: {v.decision}; recommended {doc.tick(name.get(v.recommended, v.recommended))}. {v.reason}")
        slo = report.slo.get(profile) if report.slo else None
        if slo:
            doc.p(f"SLOs of {profile}: {slo}.")
    if unmeasured:
        doc.p("No run, so in no table above:")
        doc.items([f"{doc.tick(trial)} ({'every profile' if len(profiles) == len(by_profile) else ', '.join(profiles)}): "
                   f"{reason}" for (trial, reason), profiles in unmeasured.items()])


def _nodes(doc: _Doc, report: Report) -> None:
    nodes = report.selection.nodes
    if nodes is None:
        return
    name = _labels(report)
    doc.h(f"Nodes: the baseline on every node ({nodes.profile})")
    doc.p(f"The baseline {doc.tick(name.get(nodes.trial, nodes.trial))} was run on {len(nodes.nodes)} nodes "
          f"(node controls); a significant difference means the nodes themselves differ.")
    doc.table(["Node", "Runs", "Total TPS mean [CI]", "vs other nodes"],
              [[n.node, str(n.runs), f"{n.total_tps.mean:.2f}" + (f" [{n.total_tps.ci_low:.2f}, {n.total_tps.ci_high:.2f}]"
                                                                     if n.total_tps.ci_low is not None else ""),
                interval_text(n.vs_others)] for n in nodes.nodes])
    doc.p("Nodes differ significantly." if nodes.effect else "No significant difference between nodes.")


def _definitions(doc: _Doc, report: Report) -> None:
    """What TPOT means here, near the top; every number's definition is the appendix's table
    (farm/analysis/definitions.py, and the JSON's `definitions`)."""
    doc.h("How the numbers are defined")
    doc.p("TPOT is the time per output token after the first, (latency - TTFT) / (output tokens - 1), as vLLM's "
          "`bench serve`, SGLang's `bench_serving` and AIPerf define it; guidellm's own \"time per output token\" "
          "(latency over all output tokens, first included) is reported apart as latency per output token. Every "
          f"number's meaning and what measures it: {appendix_ref(doc, 'Definitions')}.")


def definitions_section(doc: _Doc, report: Report) -> None:
    """Every number's meaning and what measures it (the appendix)."""
    doc.h("Definitions")
    doc.table(["Number", "Keys", "Meaning", "Measured by"], definitions_table())


def _checks(doc: _Doc, report: Report) -> None:
    doc.h("Checks")
    if report.notes:
        doc.p("Notes (not anomalies):")
        doc.items(report.notes)
    if not report.warnings:
        doc.p("No check failed.")
        return
    for code in dict.fromkeys(w.code for w in report.warnings):
        doc.h3(code)
        lines = [(f"{doc.tick(w.trial)}" + (f" ({w.profile})" if w.profile else "") + ": " if w.trial else
                  (f"({w.profile}) " if w.profile else "")) + w.message for w in report.warnings if w.code == code]
        shared = _shared_tail(lines)
        if shared:  # what every line of the code says alike, said once
            doc.items([line[: -len(shared)] for line in lines])
            doc.p(f"All {len(lines)}{shared}.")
        else:
            doc.items(lines)


def _shared_tail(lines: list[str], least: int = 60) -> str:
    """The clause (from a ': ' or '; ') that ends every line alike, where there are three lines or
    more and it is long enough to be worth saying once; else ''."""
    if len(lines) < 3:
        return ""
    tail = lines[0]
    for line in lines[1:]:
        n = 0
        while n < min(len(tail), len(line)) and tail[-1 - n] == line[-1 - n]:
            n += 1
        tail = tail[len(tail) - n:]
    cut = min((i for i in (tail.find(": "), tail.find("; ")) if i >= 0), default=-1)
    tail = tail[cut:] if cut >= 0 else ""
    return tail if len(tail) >= least and all(len(line) > len(tail) for line in lines) else ""


def _rates(doc: _Doc, report: Report) -> None:
    rate = report.rate_analysis
    if rate is None:
        return
    sel = report.selection
    other = METRIC_LABELS[rate.other_metric]
    doc.h("Throughput: recorded vs " + other)
    doc.p(f"{rate.mismatched_runs} of {rate.measured_runs} runs have a recorded total throughput more than "
          f"{RATE_TOLERANCE * 100:.0f} % away from {other} (largest: {rate.worst_mismatch_pct:+.2f} %).")
    doc.p(f"What each metric recommends (every eligible trial's rank under both: "
          f"{appendix_ref(doc, 'Ranks by both rates')}):")
    doc.table(["Metric", "Strategy", "Trial", "Value", "Other metric"],
              [[METRIC_LABELS[c.metric], c.strategy, c.trial, _num(c.value), _num(c.other_value)]
               for c in rate.choices])
    mine = [c for c in rate.choices if c.strategy == sel.strategy]
    if rate.recommendation_changes:
        doc.p(f"The conclusion depends on the metric: ranked by {other}, {sel.strategy} recommends "
              f"{doc.tick(mine[1].trial)} instead of {doc.tick(mine[0].trial)}.")
    else:
        doc.p(f"Both metrics lead {sel.strategy} to the same trial.")
    if rate.gains:
        doc.p("Gain of the recommendation over the baseline under each metric:")
        doc.table(["Profile", "Recorded", other, "Baseline (recorded / other)", "Recommended (recorded / other)"],
                  [[g.profile, _signed(g.recorded_delta_pct), _signed(g.recomputed_delta_pct),
                    f"{_num(g.baseline_recorded)} / {_num(g.baseline_recomputed)}",
                    f"{_num(g.recommended_recorded)} / {_num(g.recommended_recomputed)}"] for g in rate.gains])


def rate_ranks(doc: _Doc, report: Report) -> None:
    """Every eligible trial on the primary profile ranked by both rates (the appendix)."""
    rate = report.rate_analysis
    if rate is None or not rate.primary:
        return
    other = METRIC_LABELS[rate.other_metric]
    doc.h("Ranks by both rates")
    doc.p(f"Eligible trials on {doc.tick(report.selection.primary_profile)} under both metrics:")
    doc.table(["Trial", "Total TPS recorded", "Rank", other, "Rank"],
              [[r.trial, _num(r.recorded), str(r.recorded_rank), _num(r.recomputed), str(r.recomputed_rank or "n/a")]
               for r in rate.primary])


def _conditions(doc: _Doc, report: Report) -> None:
    res = report.results
    doc.h("Conditions")
    facts = [f"Source: {res.source}"]
    if res.engine_versions:
        facts.append("Engines: " + ", ".join(f"{e} {v}" for e, v in res.engine_versions.items()))
    doc.items(facts)
    doc.table(["Profile", "Dataset", "Input tokens", "Output tokens", "Request rate", "Total requests"],
              [[name, p.dataset or "", str(p.input_tokens or ""), str(p.output_tokens or ""),
                _num(p.request_rate, "g") if p.request_rate else "", str(p.total_requests)]
               for name, p in res.profiles.items()])


def _provenance(doc: _Doc, report: Report) -> None:
    """What the numbers were measured with: versions, GPU, weights, and each engine's start."""
    firsts = first_provenances(report)
    if not firsts:
        return
    doc.h("Provenance")
    seen = lambda attr, recs=firsts.values(): sorted({str(getattr(r.provenance, attr)) for r in recs  # noqa: E731
                                                      if getattr(r.provenance, attr) is not None})
    # An engine that loads no weights (the mock) has none to call real.
    weighed = [r for r in firsts.values() if r.engine not in ENGINES or ENGINES[r.engine].loads_weights]
    facts = [f"{label}: {', '.join(values)}" for label, values in
             (("Engine versions", seen("engine_version")), ("Client", seen("client_version")), ("GPU", seen("gpu")),
              ("Weights", seen("weights", weighed))) if values]
    if any(r.dummy_weights for r in firsts.values()):
        facts.append("Dummy weights: the real architecture with random weights. Throughput and latency are the "
                     "architecture's; output text, and anything that depends on it (speculative decoding's accepted "
                     "tokens), are not, so farm recommends no speculative configuration from these runs.")
    doc.items(facts)
    doc.p(f"Each trial's node, engine start and compile cache: {appendix_ref(doc, 'Starts')}.")


def first_provenances(report: Report) -> dict[str, RunRecord]:
    """Each trial's first run that recorded its provenance."""
    firsts: dict[str, RunRecord] = {}
    for rec in report.results.records:
        if rec.provenance is not None:
            firsts.setdefault(rec.trial, rec)
    return firsts


def starts_table(doc: _Doc, report: Report) -> None:
    """Each trial's node, engine start and compile cache (the appendix)."""
    firsts = first_provenances(report)
    if not firsts:
        return
    doc.h("Starts")
    doc.table(["Trial", "Node", "Engine start (s)", "Compile cache"],
              [[r.label, r.node or "", _num(r.provenance.engine_start_s, ".0f"), _compile_cache_cell(r.provenance)]
               for r in firsts.values()])


def _compile_cache_cell(prov: Provenance) -> str:
    """cold or warm; a cache the engine found but could not load says why (it compiled again)."""
    cell = {True: "cold", False: "warm", None: ""}[prov.engine_start_cold]
    if prov.start_cache_unusable:
        cell += f" (the cache found could not be loaded: {prov.start_cache_unusable})"
    return cell


def _reference(doc: _Doc, report: Report) -> None:
    ref = report.reference
    if ref is None or not ref.rows:
        return
    doc.h(f"Against the {ref.label}")
    if ref.note:
        doc.p(ref.note)
    doc.table(["Trial", "Profile", f"{ref.label}: reported TPS", f"{ref.label}: from its totals", "farm TPS (runs)",
               "farm / totals"],
              [[r.trial, r.profile if r.profile == r.reference_profile else f"{r.profile} ({r.reference_profile})",
                _num(r.reference_reported_tps), _num(r.reference_totals_tps), f"{_num(r.farm_tps)} ({r.farm_runs})",
                f"{r.ratio_to_totals:.2f}x" if r.ratio_to_totals is not None else ""] for r in ref.rows])


def _engines(doc: _Doc, report: Report) -> None:
    sel = report.selection
    if not sel.engines:
        return
    doc.h(f"Engines on defaults ({sel.engine_comparison_profile})")
    # The limits each engine ran under (its log), where farm read them: results without them
    # (the seed's file, older sweeps) keep the table they always had.
    limits = any(e.limits is not None for e in sel.engines)
    doc.table(["Engine", "Trial", "Model", "Total TPS", "Mean TPOT (ms)", "Eligible", *(_LIMIT_HEADERS if limits else ())],
              [[e.engine, e.trial, e.model, _num(e.total_tps), _num(e.tpot_mean_ms), "yes" if e.eligible else "no",
                *(_limit_cells(e.limits) if limits else [])] for e in sel.engines])
    lead = sel.engine_lead
    if lead:
        line = (f"{lead.leader} is faster than {lead.runner_up} by {lead.total_tps_ahead:,.2f} tok/s "
                f"({lead.total_tps_ahead_pct:.1f} %)")
        if lead.tpot_lower_pct is not None:
            rows = {e.engine: e for e in sel.engines}
            line += (f"; mean TPOT {rows[lead.leader].tpot_mean_ms:.2f} ms vs {rows[lead.runner_up].tpot_mean_ms:.2f} ms, "
                     f"{lead.tpot_lower_ms:.2f} ms lower ({lead.tpot_lower_pct:.2f} %)")
        if lead.limits_apart:
            line += (". They ran under clearly different effective limits (from their logs): "
                     + "; ".join(lead.limits_apart) + ": the gap may say more about these defaults than about the engines")
        doc.p(line + ".")


_LIMIT_HEADERS = ("Requests at once", "KV-cache tokens", "Batch tokens")


def _limit_cells(limits) -> list[str]:
    if limits is None:
        return ["", "", ""]
    running = _int(limits.max_running_requests)
    if running and limits.max_running_requests_from == "engine default":
        running += " (default)"
    return [running, _int(limits.kv_cache_tokens), _int(limits.max_batched_tokens)]


def _int(x: int | None) -> str:
    return f"{x:,}" if x is not None else ""


def _steps(doc: _Doc, report: Report) -> None:
    sel = report.selection
    if not sel.steps:
        return
    doc.h(f"Optimization steps (grid {sel.step_grid}, {sel.primary_profile})")
    doc.table(["Step", "Builds on", "Adds", "Total TPS", "vs step before", "vs baseline", "Verdict", "Evidence"],
              [[s.step, s.after or "", _adds(s, doc), _num(s.total_tps), _signed(s.delta_pct),
                _signed(s.delta_vs_baseline_pct), f"{s.verdict}: {s.reason}" if s.reason else s.verdict,
                _step_evidence(s)] for s in sel.steps])


def _step_evidence(step) -> str:
    if step.significance is None:
        return ""
    if step.significance == "cannot_tell":
        return "cannot tell (single runs)"
    return f"{decision_word(step.delta) or step.significance.replace('_', ' ')}: {interval_text(step.delta, decided=False)}"


def _adds(step, doc: _Doc) -> str:
    parts = (["another model"] if step.model_changed else []) + [doc.tick(f) for f in step.added_flags]
    return ", ".join(parts) or ("engine defaults" if step.after is None else "")


FORMATS = ("text", "markdown", "json")


def render(report: Report, fmt: str = "text") -> str:
    """The report: `text`, `markdown` (the appendix apart: farm.report.appendix) or `json` (all of it: data)."""
    if fmt == "json":
        return json.dumps(report_json(report), indent=2) + "\n"
    if fmt not in FORMATS:
        raise UserError(f"unknown report format '{fmt}' (text, markdown, json)", key="--format")
    doc = _Doc(markdown=fmt == "markdown")
    doc.title(report.title)
    # The Conclusion is the first screen; every section after it is opened on purpose, and every
    # trial's row and every run's figures are the appendix's (farm/report/appendix.py).
    sections: list[Callable[[_Doc, Report], None]] = [
        _conclusion, _why, _definitions, capacity_section, _checks, _cross, _evidence, quality_section, _rates,
        _conditions,
        _provenance, gpu_time_section, energy_cost_section, search_sections, _reference, _engines,
        engine_matchups_section, _steps, _nodes]
    for section in sections:
        section(doc, report)
    return doc.text()
