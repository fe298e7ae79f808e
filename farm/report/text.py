"""Rendering a report: text and markdown in the seed's shape, and the JSON object."""

from __future__ import annotations

import json
from typing import Any, Callable

from farm.analysis.definitions import definitions_table
from farm.analysis.records import Provenance, RunRecord
from farm.analysis.select import (
    METRIC_LABELS,
    STAT_LABELS,
    STAT_METRICS,
)
from farm.engines import ENGINES
from farm.errors import UserError
from farm.report.capacity_text import capacity_section
# The formatters and the Conclusion live apart (farm/report/cells.py, farm/report/conclusion.py);
# their names stay importable from here, where the summary, the appendix, the plots and tests take them.
from farm.report.cells import _ci_cell as _ci_cell, _conf, _labels, _num, _signed, pretty_command as pretty_command
from farm.report.checks import _fmt_pct, decision_word, interval_text
from farm.report.conclusion import _conclusion, _why, conclusion_decisions as conclusion_decisions
from farm.report.conclusion import verdict_line as verdict_line
from farm.report.cost import gpu_time_section
from farm.report.energy_cost import energy_cost_section
from farm.report.layout import appendix_ref
from farm.report.quality_text import quality_cell, quality_json, quality_section
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
    # which fused-MoE kernel config each start ran, where the engines' logs said (issue 47)
    moe = any(r.provenance.moe_config for r in firsts.values())
    doc.table(["Trial", "Node", "Engine start (s)", "Compile cache"] + (["MoE kernel config"] if moe else []),
              [[r.label, r.node or "", _num(r.provenance.engine_start_s, ".0f"), _compile_cache_cell(r.provenance)]
               + ([r.provenance.moe_config or ""] if moe else []) for r in firsts.values()])


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
