"""The report: the seed's shape in English (text and markdown), the JSON object, and PNG plots.

`build_report` runs selection and the checks the seed missed (each a warning with a stable code)
and the throughput-from-totals analysis; the renderers only format what it computed, so text,
markdown and JSON always tell the same story.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from farm.errors import UserError
from farm.analysis.plan import AUTO_MAX_PASSES
from farm.analysis.records import Results, RunRecord
from farm.analysis.reference import ReferenceComparison, compare_with_reference
from farm.analysis.select import (
    METRIC_LABELS,
    SINGLE_RUN_NOISE,
    STAT_LABELS,
    STAT_METRICS,
    STRATEGIES,
    ReportWarning,
    Selection,
    SelectionSettings,
    build_table,
    delta_pct,
    pct_text,
    select,
    settings_for,
)

if TYPE_CHECKING:
    from farm.study.spec import Study

# Thresholds of the checks (issue 3, point 6).
RATE_TOLERANCE = 0.02      # recorded vs recomputed token rate
TPOT_TOLERANCE = 0.25      # mean TPOT vs what mean latency and TTFT imply
PEAK_FACTOR = 10.0         # peak output rate vs mean output rate

WARNING_CODES = ("rate_mismatch", "tpot_inconsistent", "peak_implausible", "itl_zero", "single_run",
                 "local_optimum", "no_baseline")
# Checks of the evidence itself (issue 7): differences the data cannot separate, a recommendation
# whose gain over the baseline is not significant, nodes that differ, knobs tried only up to an edge.
EVIDENCE_CODES = ("cannot_separate", "not_significant", "regression", "node_effect", "edge_of_range")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RateChoice(_Strict):
    """What one throughput metric would recommend under one strategy."""

    metric: str = Field(description="Metric ranked by.")
    strategy: str
    trial: str = Field(description="Label of the trial it recommends.")
    command: str
    value: float = Field(description="The trial's value of `metric` on the primary profile.")
    other_value: float | None = Field(description="The same trial's value of the other metric.")


class RateRow(_Strict):
    """One eligible trial on the primary profile under both metrics."""

    trial: str
    recorded: float
    recomputed: float | None
    recorded_rank: int
    recomputed_rank: int | None


class RateGain(_Strict):
    """Baseline -> recommendation gain on one profile under both metrics."""

    profile: str
    recorded_delta_pct: float
    recomputed_delta_pct: float | None
    baseline_recorded: float
    baseline_recomputed: float | None
    recommended_recorded: float
    recommended_recomputed: float | None


class RateAnalysis(_Strict):
    """Selection redone with the other token-rate metric: does the conclusion hold?"""

    recorded_metric: str = Field(default="total_tps", description="Metric selection used.")
    other_metric: str = Field(description="tps_from_totals, or guidellm's mean when farm computed total_tps from totals.")
    mismatched_runs: int = Field(description=f"Runs whose two rates differ by more than {RATE_TOLERANCE:.0%}.")
    measured_runs: int
    worst_mismatch_pct: float | None = Field(description="Largest (recorded - other) / other, in %.")
    choices: list[RateChoice]
    primary: list[RateRow]
    gains: list[RateGain]
    recommendation_changes: bool = Field(description="The other metric recommends another trial under the same strategy.")


class Report(_Strict):
    """Selection, its warnings and the rate analysis, with the results they came from."""

    title: str
    selection: Selection
    warnings: list[ReportWarning]
    rate_analysis: RateAnalysis | None
    results: Results
    slo: dict[str, str] = Field(default_factory=dict, description="Profile -> its SLOs in words.")
    reference: ReferenceComparison | None = Field(default=None, description="farm's numbers beside the study's reference.")


# --------------------------------------------------------------------------------------
# building


def other_metric(results: Results) -> str:
    """The rate to check `total_tps` against.

    A results file like the seed's records its client's figure as `total_tps`: check it against
    tokens / duration. farm records tokens / duration as `total_tps` and guidellm's own mean
    beside it: check against that.
    """
    if any("guidellm_total_tps_mean" in r.metrics for r in results.records if r.measured):
        return "guidellm_total_tps_mean"
    return "tps_from_totals"


def build_report(results: Results, settings: SelectionSettings, strategy: str = "best") -> Report:
    selection = select(results, settings, strategy)
    rate = rate_analysis(results, settings, selection)
    warnings = check_warnings(results, selection, rate)
    models = ", ".join(dict.fromkeys(r.model for r in results.records))
    return Report(title=f"Throughput optimization of {models}", selection=selection, warnings=warnings,
                  rate_analysis=rate, results=results,
                  slo={p: slo_text(spec) for p, spec in settings.slo.items()})


def slo_text(slo) -> str:
    parts = []
    if slo.ttft_p95_ms_max is not None:
        parts.append(f"P95 TTFT <= {slo.ttft_p95_ms_max:g} ms")
    if slo.tpot_mean_ms_max is not None:
        parts.append(f"mean TPOT <= {slo.tpot_mean_ms_max:g} ms")
    if slo.min_success_rate is not None:
        parts.append(f"success rate >= {pct_text(slo.min_success_rate)}")
    return ", ".join(parts) + (" (mean over the repeats); also guidellm goodput" if slo.goodput else " (mean over the repeats)")


def report_for(results: Results, study: "Study", *, strategy: str = "best", baseline: str | None = None,
               grid: str | None = None, prefer_results_profile: bool = False) -> Report:
    """The one entry point of `farm analyze`, `farm report` and the end of `farm sweep`."""
    settings = settings_for(results, study, baseline=baseline, grid=grid, prefer_results_profile=prefer_results_profile)
    report = build_report(results, settings, strategy)
    ref = study.reference
    if ref is not None:
        from farm.inputs import read_results_file

        if Path(ref.results).is_file():
            report.reference = compare_with_reference(results, read_results_file(ref.results), label=ref.label,
                                                      profiles=ref.profiles, note=ref.note)
        else:  # a stored sweep's study names the file where the sweep ran: another machine may not have it
            report.warnings.append(ReportWarning(
                code="reference_missing", message=f"the study's reference results {ref.results} are not on this "
                f"machine: farm's numbers are reported without the {ref.label}'s beside them; "
                f"`farm analyze --results FILE --config STUDY` sets them side by side"))
    return report


def _choice(results: Results, settings: SelectionSettings, strategy: str, metric: str, other: str) -> RateChoice | None:
    try:
        sel = select(results, settings, strategy, metric)
    except UserError:  # e.g. no step is kept under this metric: then it recommends nothing
        return None
    rec = results.trial_records(sel.recommended.trial)
    primary = [r for r in rec if r.profile == settings.primary_profile and r.measured]
    values = [v for r in primary if (v := r.metric(other)) is not None]
    return RateChoice(metric=metric, strategy=strategy, trial=rec[0].label, command=sel.recommended.command,
                      value=sel.recommended.total_tps, other_value=sum(values) / len(values) if values else None)


def _ranks(values: dict[str, float | None]) -> dict[str, int]:
    order = sorted((k for k, v in values.items() if v is not None), key=lambda k: -values[k])
    return {k: i + 1 for i, k in enumerate(order)}


def rate_analysis(results: Results, settings: SelectionSettings, selection: Selection) -> RateAnalysis | None:
    other = other_metric(results)
    pairs = [(r.metrics["total_tps"], r.metric(other)) for r in results.records if r.measured]
    pairs = [(a, b) for a, b in pairs if b]
    if not pairs:
        return None
    diffs = [(a - b) / b for a, b in pairs]
    strategies = [selection.strategy] + [s for s in STRATEGIES if s != selection.strategy]
    choices = [c for s in strategies for m in ("total_tps", other)
               if (c := _choice(results, settings, s, m, other if m == "total_tps" else "total_tps"))]
    recorded = build_table(results, "total_tps", settings.min_success_rate, settings.slo)
    recomputed = build_table(results, other, settings.min_success_rate, settings.slo)
    cells = [c for c in recorded.on(settings.primary_profile) if c.eligible and c.control_of is None]
    rec_values = {c.trial: c.score for c in cells}
    other_values = {c.trial: recomputed.cells[(c.trial, c.profile)].score for c in cells}
    r1, r2 = _ranks(rec_values), _ranks(other_values)
    rows = sorted((RateRow(trial=recorded.first[t].label, recorded=rec_values[t], recomputed=other_values[t],
                           recorded_rank=r1[t], recomputed_rank=r2.get(t)) for t in rec_values),
                  key=lambda r: r.recorded_rank)
    same_strategy = [c for c in choices if c.strategy == selection.strategy]
    changes = len({c.trial for c in same_strategy}) > 1
    return RateAnalysis(other_metric=other, mismatched_runs=sum(abs(d) > RATE_TOLERANCE for d in diffs),
                        measured_runs=len(pairs), worst_mismatch_pct=max(diffs, key=abs) * 100,
                        choices=choices, primary=rows, gains=_gains(selection, recomputed), recommendation_changes=changes)


def _gains(selection: Selection, recomputed) -> list[RateGain]:
    out = []
    if selection.baseline is None:
        return out
    for row in selection.comparison:
        b = recomputed.get(selection.baseline.trial, row.profile)
        r = recomputed.get(selection.recommended.trial, row.profile)
        b_v, r_v = (b.score if b else None), (r.score if r else None)
        out.append(RateGain(profile=row.profile, recorded_delta_pct=row.delta_pct,
                            recomputed_delta_pct=delta_pct(r_v, b_v) if b_v and r_v is not None else None,
                            baseline_recorded=row.baseline_total_tps, baseline_recomputed=b_v,
                            recommended_recorded=row.recommended_total_tps, recommended_recomputed=r_v))
    return out


# --------------------------------------------------------------------------------------
# checks the seed missed


def _where(rec: RunRecord) -> str:
    return f"run {rec.id}: " if rec.id != rec.label else ""


def _warn(code: str, rec: RunRecord | None, message: str, profile: str | None = None) -> ReportWarning:
    return ReportWarning(code=code, trial=rec.label if rec else None, profile=rec.profile if rec else profile,
                         message=(_where(rec) if rec else "") + message)


def _apart(value: float, reference: float) -> str:
    d = (value - reference) / reference * 100
    return f"{abs(d):.2f} % {'above' if d > 0 else 'below'}"


def check_rate(rec: RunRecord) -> list[ReportWarning]:
    out = []
    recorded, totals, mean = rec.metrics.get("total_tps"), rec.tps_from_totals, rec.metrics.get("guidellm_total_tps_mean")
    if totals and abs(recorded - totals) / totals > RATE_TOLERANCE:
        out.append(_warn("rate_mismatch", rec, f"recorded total throughput {recorded:.2f} tok/s is "
                         f"{_apart(recorded, totals)} (input + output tokens) / duration = {totals:.2f} tok/s"))
    if mean and recorded and abs(mean - recorded) / recorded > RATE_TOLERANCE:
        out.append(_warn("rate_mismatch", rec, f"guidellm's mean token rate {mean:.2f} tok/s is "
                         f"{_apart(mean, recorded)} the total throughput from totals, {recorded:.2f} tok/s"))
    return out


def check_tpot(rec: RunRecord, output_tokens: int | None) -> list[ReportWarning]:
    m = rec.metrics
    n = rec.output_tokens_per_request or output_tokens
    if output_tokens is None or not n or n <= 1 or not all(k in m for k in ("latency_mean_s", "ttft_mean_ms", "tpot_mean_ms")):
        return []
    implied = (m["latency_mean_s"] * 1000 - m["ttft_mean_ms"]) / (n - 1)
    if implied <= 0 or abs(m["tpot_mean_ms"] - implied) / implied <= TPOT_TOLERANCE:
        return []
    p95 = f"; P95 TPOT {m['tpot_p95_ms']:.2f} ms" if "tpot_p95_ms" in m else ""
    return [_warn("tpot_inconsistent", rec, f"mean TPOT {m['tpot_mean_ms']:.2f} ms, but (mean latency - mean TTFT) / "
                  f"(output tokens - 1) = ({m['latency_mean_s'] * 1000:.0f} - {m['ttft_mean_ms']:.0f}) / {n - 1:.0f} = "
                  f"{implied:.2f} ms ({abs(m['tpot_mean_ms'] - implied) / implied * 100:.0f} % apart){p95}")]


def check_peak(rec: RunRecord) -> list[ReportWarning]:
    peak, mean = rec.metrics.get("peak_output_tps"), rec.metrics.get("output_tps")
    if peak is None or not mean or peak <= PEAK_FACTOR * mean:
        return []
    return [_warn("peak_implausible", rec, f"peak output throughput {peak:,.2f} tok/s is {peak / mean:,.0f} x the mean "
                  f"output throughput {mean:.2f} tok/s: an artifact of the client's windowing, not a rate")]


def check_itl(rec: RunRecord) -> list[ReportWarning]:
    itl, n = rec.metrics.get("itl_mean_ms"), rec.output_tokens_per_request
    if itl != 0 or not n or n <= 1:
        return []
    return [_warn("itl_zero", rec, f"mean inter-token latency is 0 with {n:.0f} output tokens per request: "
                  "the client recorded no inter-token latencies")]


def check_single_runs(results: Results) -> list[ReportWarning]:
    runs: dict[tuple[str, str], int] = {}
    label: dict[str, str] = {}
    for rec in results.records:
        if rec.measured:
            runs[(rec.trial, rec.profile)] = runs.get((rec.trial, rec.profile), 0) + 1
            label.setdefault(rec.trial, rec.label)
    single = [key for key, n in runs.items() if n == 1]
    if not single:
        return []
    why = "no difference can be told from run-to-run noise; repeat each trial (study `repeats`, 3 or more)"
    if len(single) == len(runs):
        return [ReportWarning(code="single_run", message=f"every trial ran once per profile ({len(runs)} runs): {why}")]
    out = []
    for trial in dict.fromkeys(t for t, _ in single):
        profiles = ", ".join(p for t, p in single if t == trial)
        out.append(ReportWarning(code="single_run", trial=label[trial], message=f"ran once on {profiles}: {why}"))
    return out


def check_selection(selection: Selection, results: Results) -> list[ReportWarning]:
    out = []
    labels = {r.trial: r.label for r in results.records}
    tps = {t.id: t.total_tps for t in selection.trials if t.profile == selection.primary_profile}
    if selection.stepwise_trial and selection.stepwise_trial != selection.best_trial:
        s, b = selection.stepwise_trial, selection.best_trial
        out.append(ReportWarning(code="local_optimum", trial=labels[s], profile=selection.primary_profile, message=(
            f"the stepwise replay chooses {labels[s]} ({tps[s]:.2f} tok/s) but the best of what was measured is "
            f"{labels[b]} ({tps[b]:.2f} tok/s, {delta_pct(tps[b], tps[s]):+.2f} %)")))
    if selection.baseline is None:
        out.append(ReportWarning(code="no_baseline", message=(
            "no engine-default trial (required flags only) was measured: there is nothing to compare the "
            "recommendation with; name one with --baseline")))
    return out


def check_rate_conclusion(rate: RateAnalysis | None, selection: Selection) -> list[ReportWarning]:
    if rate is None or not rate.recommendation_changes:
        return []
    mine = [c for c in rate.choices if c.strategy == selection.strategy]
    recorded = next((c for c in mine if c.metric == "total_tps"), None)
    other = next((c for c in mine if c.metric != "total_tps"), None)
    if recorded is None or other is None:
        return []
    return [ReportWarning(code="rate_mismatch", profile=selection.primary_profile, message=(
        f"ranked by {METRIC_LABELS[other.metric]}, the recommendation is {other.trial} ({other.value:.2f} tok/s; "
        f"{other.other_value:.2f} as recorded), not {recorded.trial} ({recorded.other_value:.2f} tok/s; "
        f"{recorded.value:.2f} as recorded): `{other.command}`"))]


def check_warnings(results: Results, selection: Selection, rate: RateAnalysis | None = None) -> list[ReportWarning]:
    """Every check of issue 3 point 6 over every run, then the study-level ones."""
    out: list[ReportWarning] = []
    for rec in results.records:
        if not rec.measured:
            continue
        profile = results.profiles.get(rec.profile)
        out += check_rate(rec)
        out += check_tpot(rec, profile.output_tokens if profile else None)
        out += check_peak(rec)
        out += check_itl(rec)
    out += check_rate_conclusion(rate, selection)
    out += check_single_runs(results)
    out += check_selection(selection, results)
    out += check_evidence(selection, results)
    order = WARNING_CODES + EVIDENCE_CODES
    return sorted(out, key=lambda w: order.index(w.code) if w.code in order else len(order))


def _fmt_pct(x: float | None, signed: bool = True) -> str:
    return "n/a" if x is None else (f"{x:+.2f} %" if signed else f"{x:.2f} %")


def interval_text(d) -> str:
    """A DiffStat as '+4.10 % [+1.20, +7.00], Holm p = 0.012' (or why it cannot be told)."""
    if d is None:
        return "n/a"
    if d.ci_low_pct is None or d.ci_high_pct is None:
        if min(d.n_a, d.n_b) < 2:
            return f"{_fmt_pct(d.relative_pct)} (single runs: no interval, no test)"
        return f"{_fmt_pct(d.relative_pct)} (cannot tell: {d.note or 'no interval'})"
    p = f", Holm p = {d.p_holm:.3g}" if d.p_holm is not None else ""
    return f"{_fmt_pct(d.relative_pct)} [{d.ci_low_pct:+.2f}, {d.ci_high_pct:+.2f}]{p}"


def check_evidence(selection: Selection, results: Results) -> list[ReportWarning]:
    out = []
    labels = {r.trial: r.label for r in results.records}
    primary = selection.primary_profile
    if selection.unseparated:
        rows = {t.id: t for t in selection.trials if t.profile == primary}
        names = [labels[t] for t in selection.unseparated]
        values = [rows[t].total_tps for t in selection.unseparated]
        spread = (max(values) / min(values) - 1) * 100
        listed = ", ".join(names[:-1]) + f" and {names[-1]}"
        msg = (f"single runs cannot separate {listed} on {primary}: their {METRIC_LABELS[selection.metric]} lies within "
               f"{spread:.2f} % ({min(values):.2f} to {max(values):.2f}), inside the \u00b1{SINGLE_RUN_NOISE * 100:g} % run-to-run "
               f"noise farm assumes where no repeats measure it")
        gaps = []
        for t in selection.unseparated:
            for rec in results.records:
                if rec.trial == t and rec.profile == primary and rec.measured and rec.tps_from_totals:
                    gaps.append(abs(rec.metrics["total_tps"] / rec.tps_from_totals - 1) * 100)
        if gaps and max(gaps) > RATE_TOLERANCE * 100:
            msg += (f"; the two throughput figures of these very runs (recorded and from totals) disagree by "
                    f"{min(gaps):.2f} to {max(gaps):.2f} %")
        out.append(ReportWarning(code="cannot_separate", profile=primary,
                                 message=msg + "; repeat them (study `repeats`, 3 or more) to tell them apart"))
    for row in selection.comparison:
        d = row.delta
        if d is not None and d.significant is False:
            out.append(ReportWarning(code="not_significant", trial=labels.get(d.a), profile=row.profile, message=(
                f"the recommendation's gain over the baseline on {row.profile} is not significant at "
                f"\u03b1 = {selection.alpha:g} (Holm over {len(selection.comparison)} profiles): {interval_text(d)}")))
        elif d is not None and d.significant and (d.relative_pct or 0) < 0:
            cp = selection.cross_profile
            hint = (f"; {labels.get(cp.recommended, cp.recommended)} is the best worst case over all profiles"
                    if cp is not None and cp.recommended and cp.recommended != d.a else "")
            out.append(ReportWarning(code="regression", trial=labels.get(d.a), profile=row.profile, message=(
                f"the recommendation is significantly slower than the baseline on {row.profile}: {interval_text(d)}"
                f"{hint}")))
    nodes = selection.nodes
    if nodes is not None and nodes.effect:
        for n in nodes.nodes:
            if n.vs_others and n.vs_others.significant:
                out.append(ReportWarning(code="node_effect", trial=labels.get(nodes.trial), profile=nodes.profile, message=(
                    f"the baseline on node {n.node} differs from the other nodes: {interval_text(n.vs_others)}; "
                    "trials that ran on different nodes are not strictly comparable")))
    for e in selection.edges:
        out.append(ReportWarning(code="edge_of_range", profile=primary, message=e.message))
    return out


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
        "steps": [s.model_dump() for s in sel.steps],
        "warnings": [w.model_dump(include={"code", "trial", "profile", "message"}) for w in report.warnings],
        "rate_analysis": report.rate_analysis.model_dump() if report.rate_analysis else None,
        # issue 7: the evidence behind the recommendation
        "alpha": sel.alpha,
        "sequential": sel.sequential,
        "verdicts": [v.model_dump() for v in sel.verdicts],
        "cross_profile": sel.cross_profile.model_dump() if sel.cross_profile else None,
        "nodes": sel.nodes.model_dump() if sel.nodes else None,
        "pareto": sel.pareto,
        "edges": [e.model_dump() for e in sel.edges],
        "unseparated": sel.unseparated,
    }


# --------------------------------------------------------------------------------------
# text and markdown


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "n/a" if x is None else format(x, fmt)


def _signed(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f} %"


class _Doc:
    """The few constructs the report uses, in text or markdown."""

    def __init__(self, markdown: bool):
        self.md = markdown
        self.lines: list[str] = []

    def title(self, text: str) -> None:
        self.lines += [f"# {text}", ""] if self.md else [text, "=" * len(text), ""]

    def h(self, text: str) -> None:
        self.lines += [f"## {text}", ""] if self.md else [text, "-" * len(text), ""]

    def h3(self, text: str) -> None:
        self.lines += [f"### {text}" if self.md else f"{text}:", ""]

    def p(self, text: str) -> None:
        self.lines += [text, ""]

    def code(self, text: str) -> None:
        body = text.splitlines()
        self.lines += (["```", *body, "```"] if self.md else ["    " + line for line in body]) + [""]

    def items(self, items: list[str]) -> None:
        self.lines += [f"- {i}" for i in items] + [""]

    def table(self, head: list[str], rows: list[list[str]]) -> None:
        if not rows:
            return
        if self.md:
            esc = lambda c: c.replace("|", "\\|")  # noqa: E731 - flag values can hold pipes
            self.lines += ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
            self.lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
        else:
            widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
            fmt = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
            self.lines += [fmt(head), fmt(["-" * w for w in widths]), *[fmt(r) for r in rows]]
        self.lines.append("")

    def tick(self, text: str) -> str:
        return f"`{text}`" if self.md else text

    def text(self) -> str:
        return "\n".join(self.lines).rstrip() + "\n"


def pretty_command(command: str) -> str:
    """One flag per line, as the seed prints its serve command."""
    try:
        args = shlex.split(command)
    except ValueError:
        return command
    head = [a for a in args[: next((i for i, a in enumerate(args) if a.startswith("--")), len(args))]]
    flags = args[len(head):]
    return " \\\n    ".join([shlex.join(head)] + [shlex.quote(f) for f in flags])


def _conclusion(doc: _Doc, report: Report) -> None:
    sel = report.selection
    rec = sel.recommended
    verdict = sel.verdict()
    if sel.strategy == "best" and verdict is not None and verdict.decision == "tie" and verdict.recommended != verdict.leader:
        how = "the simplest of the trials the data cannot separate from the best by"
    elif sel.strategy == "best":
        how = "the global best of what was measured: highest"
    else:
        how = (f"the stepwise replay of grid {doc.tick(sel.step_grid or '')}, each step kept only if it raises the")
    doc.h("Conclusion")
    doc.p(f"Recommended configuration ({how} {METRIC_LABELS[sel.metric]} on the {doc.tick(sel.primary_profile)} "
          f"profile among trials with a success rate of at least {pct_text(sel.min_success_rate)}; "
          f"trial {doc.tick(rec.name or rec.trial)}):")
    doc.code(pretty_command(rec.command))
    if sel.baseline is None:
        doc.p("No baseline: no engine-default trial was measured.")
    else:
        b = sel.baseline
        doc.p(f"Benchmarks before and after (baseline {doc.tick(b.name or b.trial)}: {b.engine} {b.model} "
              f"{' '.join(b.flags) or 'without flags'}):")
        doc.table(["Profile", "Baseline total TPS", "Baseline mean TPOT (ms)", "Recommended total TPS", "Delta",
                   "Recommended mean TPOT (ms)", f"Delta {_conf(sel.alpha)} CI, Holm p"],
                  [[r.profile, _num(r.baseline_total_tps), _num(r.baseline_tpot_mean_ms), _num(r.recommended_total_tps),
                    _signed(r.delta_pct), _num(r.recommended_tpot_mean_ms), _ci_cell(r.delta)] for r in sel.comparison])
        notes = [f"{r.profile}: {r.note}" for r in sel.comparison if r.note]
        notes += [f"{u.profile}: the {u.role} trial {doc.tick(u.trial)} has no number here: {u.reason}"
                  for u in sel.unmeasured]
        if notes:
            doc.items(notes)
    _verdict_paragraph(doc, report)
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


def _conf(alpha: float) -> str:
    return f"{(1 - alpha) * 100:g} %"


def _ci_cell(d) -> str:
    if d is None:
        return "n/a"
    if d.ci_low_pct is None or d.ci_high_pct is None:
        return "n/a (single runs)" if min(d.n_a, d.n_b) < 2 else "n/a"
    mark = "" if d.significant is None else (" (significant)" if d.significant else " (not significant)")
    return f"[{d.ci_low_pct:+.2f}, {d.ci_high_pct:+.2f}] %, p = {d.p_holm:.3g}{mark}"


def _labels(report: Report) -> dict[str, str]:
    return {t.id: t.name or t.id for t in report.selection.trials}


def _verdict_paragraph(doc: _Doc, report: Report) -> None:
    """Winner, tie or cannot-tell on the primary profile, in words, with the intervals behind it."""
    sel = report.selection
    v = sel.verdict()
    if v is None:
        return
    name = _labels(report)
    tick = lambda t: doc.tick(name.get(t, t))  # noqa: E731
    cmp_text = "; ".join(f"{tick(c.a)} vs {tick(c.b)} ({' and '.join(c.roles).replace('_', '-')}): {interval_text(c)}"
                         for c in v.comparisons)
    family = f"\u03b1 = {v.alpha:g}, Welch, Holm over {len(v.comparisons)} comparison(s)"
    if v.decision == "winner":
        text = f"Evidence: {tick(v.winner)} wins on {doc.tick(v.profile)}, its lead is significant ({family}): {cmp_text}."
    elif v.decision == "tie":
        lead = v.comparisons[0]
        text = (f"Evidence: no winner on {doc.tick(v.profile)} (a tie): the lead of {tick(v.leader)} over {tick(v.runner_up)} "
                f"is {interval_text(lead)}, not significant ({family}). The data cannot separate "
                f"{', '.join(tick(t) for t in v.tied)}; ")
        if v.recommended == v.leader:
            text += f"the leader {tick(v.leader)} is recommended, being also the simplest ({v.complexity.get(v.leader, 0)} non-default choices)."
        else:
            text += (f"the simplest of them, {tick(v.recommended)} ({v.complexity.get(v.recommended, 0)} non-default choices "
                     f"against {v.complexity.get(v.leader, 0)} for {tick(v.leader)}), is recommended: extra flags "
                     f"that buy no measurable throughput are not worth carrying.")
        if sel.strategy == "best" and v.recommended != sel.recommended.trial:
            text += f" (The {sel.strategy} strategy's choice differs: see above.)"
    elif v.decision == "cannot_tell":
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
        doc.p(f"These runs come from `--repeats auto`, which looks at the data after every pass and stops when the "
              f"ranking separates. Such optional stopping inflates the chance of a false winner, so every verdict here "
              f"is judged at \u03b1 = {sel.alpha:g} per look (at most {AUTO_MAX_PASSES} looks: at most "
              f"{sel.alpha * AUTO_MAX_PASSES:.0%} over all of them, Bonferroni).")


def verdict_line(report: Report) -> str | None:
    """The primary profile's verdict in one line (the end of a sweep prints it under the command)."""
    sel = report.selection
    v = sel.verdict()
    if v is None:
        return None
    name = _labels(report)
    runs = {t.id: t.repeats for t in sel.trials if t.profile == v.profile}
    lead = v.comparisons[0] if v.comparisons else None
    n = f"{runs.get(v.leader, 0)} vs {runs.get(v.runner_up, 0)} runs" if v.runner_up else ""
    if v.decision == "winner":
        return (f"{name[v.winner]} wins on {v.profile}: {interval_text(lead)} over the runner-up "
                f"{name[v.runner_up]} ({n}, \u03b1 = {v.alpha:g})")
    if v.decision == "tie":
        return (f"no winner on {v.profile} (a tie): {name[v.leader]} leads {name[v.runner_up]} by {interval_text(lead)}, "
                f"not significant ({n}, \u03b1 = {v.alpha:g}); recommending the simplest tied trial, {name[v.recommended]}")
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
    for profile, trials in by_profile.items():
        doc.h3(profile)
        front = set(sel.pareto.get(profile, []))
        trials = sorted(trials, key=lambda t: -(t.total_tps or -1))
        doc.table(["Trial", "Runs", *[STAT_LABELS[m] for m in STAT_METRICS], "Pareto", "Eligible"],
                  [[t.name or t.id, str(t.repeats), *[_stat_cell(t, m) for m in STAT_METRICS],
                    "yes" if t.id in front else "", "yes" if t.eligible else f"no: {t.reason}"] for t in trials])
        v = verdicts.get(profile)
        if v is not None:
            doc.p(f"Verdict: {v.decision}; recommended {doc.tick(name.get(v.recommended, v.recommended))}. {v.reason}")
        slo = report.slo.get(profile) if report.slo else None
        if slo:
            doc.p(f"SLOs of {profile}: {slo}.")


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


def _checks(doc: _Doc, report: Report) -> None:
    doc.h("Checks")
    if not report.warnings:
        doc.p("No check failed.")
        return
    for code in dict.fromkeys(w.code for w in report.warnings):
        doc.h3(code)
        doc.items([(f"{doc.tick(w.trial)}" + (f" ({w.profile})" if w.profile else "") + ": " if w.trial else
                    (f"({w.profile}) " if w.profile else "")) + w.message for w in report.warnings if w.code == code])


def _rates(doc: _Doc, report: Report) -> None:
    rate = report.rate_analysis
    if rate is None:
        return
    sel = report.selection
    other = METRIC_LABELS[rate.other_metric]
    doc.h("Throughput: recorded vs " + other)
    doc.p(f"{rate.mismatched_runs} of {rate.measured_runs} runs have a recorded total throughput more than "
          f"{RATE_TOLERANCE * 100:.0f} % away from {other} (largest: {rate.worst_mismatch_pct:+.2f} %).")
    doc.p(f"Eligible trials on {doc.tick(sel.primary_profile)} under both metrics:")
    doc.table(["Trial", "Total TPS recorded", "Rank", other, "Rank"],
              [[r.trial, _num(r.recorded), str(r.recorded_rank), _num(r.recomputed), str(r.recomputed_rank or "n/a")]
               for r in rate.primary])
    doc.p("What each metric recommends:")
    doc.table(["Metric", "Strategy", "Trial", "Value", "Other metric", "Command"],
              [[METRIC_LABELS[c.metric], c.strategy, c.trial, _num(c.value), _num(c.other_value), doc.tick(c.command)]
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
    firsts: dict[str, RunRecord] = {}
    for rec in report.results.records:
        if rec.provenance is not None:
            firsts.setdefault(rec.trial, rec)
    if not firsts:
        return
    doc.h("Provenance")
    seen = lambda attr: sorted({str(getattr(r.provenance, attr)) for r in firsts.values()  # noqa: E731
                                if getattr(r.provenance, attr) is not None})
    facts = [f"{label}: {', '.join(values)}" for label, values in
             (("Engine versions", seen("engine_version")), ("Client", seen("client_version")), ("GPU", seen("gpu")),
              ("Weights", seen("weights"))) if values]
    if any(r.dummy_weights for r in firsts.values()):
        facts.append("Dummy weights: the real architecture with random weights. Throughput and latency are the "
                     "architecture's; output text, and anything that depends on it (speculative decoding's accepted "
                     "tokens), are not, so farm recommends no speculative configuration from these runs.")
    doc.items(facts)
    doc.table(["Trial", "Node", "Engine start (s)", "Compile cache"],
              [[r.label, r.node or "", _num(r.provenance.engine_start_s, ".0f"),
                {True: "cold", False: "warm", None: ""}[r.provenance.engine_start_cold]] for r in firsts.values()])


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
    doc.table(["Engine", "Trial", "Model", "Total TPS", "Mean TPOT (ms)", "Eligible"],
              [[e.engine, e.trial, e.model, _num(e.total_tps), _num(e.tpot_mean_ms), "yes" if e.eligible else "no"]
               for e in sel.engines])
    lead = sel.engine_lead
    if lead:
        line = (f"{lead.leader} is faster than {lead.runner_up} by {lead.total_tps_ahead:,.2f} tok/s "
                f"({lead.total_tps_ahead_pct:.1f} %)")
        if lead.tpot_lower_pct is not None:
            rows = {e.engine: e for e in sel.engines}
            line += (f"; mean TPOT {rows[lead.leader].tpot_mean_ms:.2f} ms vs {rows[lead.runner_up].tpot_mean_ms:.2f} ms, "
                     f"{lead.tpot_lower_ms:.2f} ms lower ({lead.tpot_lower_pct:.2f} %)")
        doc.p(line + ".")


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
    return f"{step.significance.replace('_', ' ')}: {interval_text(step.delta)}"


def _adds(step, doc: _Doc) -> str:
    parts = (["another model"] if step.model_changed else []) + [doc.tick(f) for f in step.added_flags]
    return ", ".join(parts) or ("engine defaults" if step.after is None else "")


def _trials(doc: _Doc, report: Report) -> None:
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


def _runs(doc: _Doc, report: Report) -> None:
    doc.h("Runs")
    for rec in report.results.records:
        doc.h3(f"{rec.id} ({rec.label}, {rec.profile}" + (f", repeat {rec.repeat}" if rec.repeat else "") + ")")
        doc.p(f"{rec.engine} {rec.model}, backend parameters:")
        doc.code("\n".join(rec.flags) or "(none)")
        doc.code(benchmark_block(rec))


FORMATS = ("text", "markdown", "json")


def render(report: Report, fmt: str = "text") -> str:
    """`text`, `markdown` (adds each run's Serving Benchmark Result block) or `json`."""
    if fmt == "json":
        return json.dumps(report_json(report), indent=2) + "\n"
    if fmt not in FORMATS:
        raise UserError(f"unknown report format '{fmt}' (text, markdown, json)", key="--format")
    doc = _Doc(markdown=fmt == "markdown")
    doc.title(report.title)
    sections: list[Callable[[_Doc, Report], None]] = [_conclusion, _checks, _cross, _evidence, _rates, _conditions,
                                                      _provenance, _reference, _engines, _steps, _trials, _nodes]
    for section in sections + ([_runs] if doc.md else []):
        section(doc, report)
    if not doc.md:
        doc.p("(--format markdown adds each run's Serving Benchmark Result block.)")
    return doc.text()


# --------------------------------------------------------------------------------------
# plots


def _profile_rows(report: Report) -> dict[str, list]:
    rows: dict[str, list] = {}
    for t in report.selection.trials:
        if t.total_tps is not None:
            rows.setdefault(t.profile, []).append(t)
    return rows


def _style(report: Report, trial) -> tuple[str, str]:
    sel = report.selection
    if trial.id == sel.recommended.trial:
        return "tab:green", "recommended"
    if sel.baseline and trial.id == sel.baseline.trial:
        return "tab:blue", "baseline"
    return ("tab:gray", "other") if trial.eligible else ("lightgray", "not eligible")


def _figure(rows: int, height: float):
    # The object API with the Agg canvas: no pyplot, no global backend switch, no display needed.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, max(2.5, height)), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(rows, 1, squeeze=False)[:, 0]


def _err(trials, metric: str) -> tuple[list[float], list[float]]:
    """Distances from the mean to each end of the interval (0 without one), for error bars."""
    low, high = [], []
    for t in trials:
        st = t.stats.get(metric)
        ok = st is not None and st.ci_low is not None
        low.append(st.mean - st.ci_low if ok else 0.0)
        high.append(st.ci_high - st.mean if ok else 0.0)
    return low, high


def _bar_label(t) -> str:
    st = t.stats.get("total_tps")
    if st is None or st.ci_low is None:
        return f"{t.total_tps:.0f}"
    return f"{t.total_tps:.0f} \u00b1{(st.ci_high - st.ci_low) / 2:.0f} (n={st.n})"


def plot_throughput(report: Report, path: Path) -> Path:
    rows = _profile_rows(report)
    fig, axes = _figure(len(rows), sum(0.35 * len(v) + 0.9 for v in rows.values()))
    for ax, (profile, trials) in zip(axes, rows.items()):
        labels = [t.name or t.id for t in trials]
        styles = [_style(report, t) for t in trials]
        low, high = _err(trials, "total_tps")
        bars = ax.barh(labels, [t.total_tps for t in trials], color=[c for c, _ in styles],
                       hatch=[("//" if not t.eligible else "") for t in trials],
                       xerr=[low, high], error_kw={"ecolor": "black", "capsize": 3, "elinewidth": 1})
        for bar, t, up in zip(bars, trials, high):  # the label past the interval's end, not on it
            ax.annotate(_bar_label(t), (t.total_tps + up, bar.get_y() + bar.get_height() / 2), xytext=(4, 0),
                        textcoords="offset points", va="center", fontsize=8)
        ax.invert_yaxis()
        ax.set_title(profile, fontsize=10, loc="left")
        ax.set_xlabel("total token throughput (tok/s)", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.margins(x=0.15)
    conf = _conf(report.selection.alpha)
    fig.suptitle(f"Total token throughput per profile and trial, mean and {conf} interval over the repeats "
                 "(green: recommended, blue: baseline, hatched: not eligible)", fontsize=9)
    fig.savefig(path, dpi=110)
    return path


def plot_tps_vs_tpot(report: Report, path: Path) -> Path:
    rows = {p: [t for t in ts if t.tpot_mean_ms is not None] for p, ts in _profile_rows(report).items()}
    rows = {p: ts for p, ts in rows.items() if ts}
    fig, axes = _figure(max(1, len(rows)), 3.2 * max(1, len(rows)))
    for ax, (profile, trials) in zip(axes, rows.items()):
        # Numbers beside the points and names in the legend: trials that differ by one flag sit on
        # top of each other, and their full names would overlap into an unreadable blot.
        front = report.selection.pareto.get(profile, [])
        on_front = sorted((t for t in trials if t.id in front), key=lambda t: t.tpot_mean_ms)
        if on_front:
            ax.plot([t.tpot_mean_ms for t in on_front], [t.total_tps for t in on_front], color="tab:orange",
                    linewidth=1.2, linestyle="--", zorder=1, label="Pareto front")
        y_low, y_high = _err(trials, "total_tps")
        x_low, x_high = _err(trials, "tpot_mean_ms")
        for i, t in enumerate(trials, 1):
            color, _ = _style(report, t)
            ax.errorbar(t.tpot_mean_ms, t.total_tps, xerr=[[x_low[i - 1]], [x_high[i - 1]]],
                        yerr=[[y_low[i - 1]], [y_high[i - 1]]], fmt="o" if t.eligible else "x", color=color,
                        ecolor=color, elinewidth=0.8, capsize=2, zorder=2,
                        markeredgecolor="tab:orange" if t.id in front else color,
                        markeredgewidth=1.8 if t.id in front else 1.0,
                        label=f"{i}  {t.name or t.id}" + ("  (Pareto)" if t.id in front else ""))
            ax.annotate(str(i), (t.tpot_mean_ms, t.total_tps), fontsize=7, xytext=(4, 3), textcoords="offset points")
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7, frameon=False)
        ax.set_title(profile, fontsize=10, loc="left")
        ax.set_xlabel("mean TPOT (ms)", fontsize=8)
        ax.set_ylabel("total tok/s", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.margins(0.2)
    fig.suptitle("Throughput against mean TPOT, with intervals (up and left is better; x: not eligible; "
                 "orange: the Pareto front of eligible trials)", fontsize=9)
    fig.savefig(path, dpi=110)
    return path


def write_plots(report: Report, directory: str | Path) -> list[Path]:
    """Write the report's PNG plots into `directory`; returns their paths."""
    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the plot directory: {exc.strerror}", file=str(out)) from None
    return [plot_throughput(report, out / "total_tps_by_profile.png"), plot_tps_vs_tpot(report, out / "tps_vs_tpot.png")]
