"""The checks the seed missed: each a warning with a stable code."""

from __future__ import annotations

from dataclasses import dataclass

from farm.analysis.drift import order_warnings
from farm.analysis.limits import overrides_text
from farm.analysis.records import Results, RunRecord
from farm.analysis.select import (
    METRIC_LABELS,
    FAMILY_ALPHA,
    MAX_RUNS_EACH,
    DiffStat,
    SINGLE_RUN_NOISE,
    ReportWarning,
    Selection,
    delta_pct,
)
from farm.report.models import (
    EVIDENCE_CODES,
    PEAK_FACTOR,
    RATE_TOLERANCE,
    TPOT_TOLERANCE,
    WARNING_CODES,
    RateAnalysis,
)

# --------------------------------------------------------------------------------------
# checks the seed missed


def _where(rec: RunRecord) -> str:
    return f"run {rec.id}: " if rec.id != rec.label else ""


def _warn(code: str, rec: RunRecord | None, message: str, profile: str | None = None,
          size: float | None = None) -> ReportWarning:
    return ReportWarning(code=code, trial=rec.label if rec else None, profile=rec.profile if rec else profile,
                         message=(_where(rec) if rec else "") + message, size=size)


def _apart(value: float, reference: float) -> str:
    d = (value - reference) / reference * 100
    return f"{abs(d):.2f} % {'above' if d > 0 else 'below'}"


def check_rate(rec: RunRecord) -> list[ReportWarning]:
    out = []
    recorded, totals, mean = rec.metrics.get("total_tps"), rec.tps_from_totals, rec.metrics.get("guidellm_total_tps_mean")
    if totals and abs(recorded - totals) / totals > RATE_TOLERANCE:
        out.append(_warn("rate_mismatch", rec, f"recorded total throughput {recorded:.2f} tok/s is "
                         f"{_apart(recorded, totals)} (input + output tokens) / duration = {totals:.2f} tok/s",
                         size=abs(recorded - totals) / totals * 100))
    if mean and recorded and abs(mean - recorded) / recorded > RATE_TOLERANCE:
        out.append(_warn("rate_mismatch", rec, f"guidellm's mean token rate {mean:.2f} tok/s is "
                         f"{_apart(mean, recorded)} the total throughput from totals, {recorded:.2f} tok/s",
                         size=abs(mean - recorded) / recorded * 100))
    return out


def check_tpot(rec: RunRecord, output_tokens: int | None) -> list[ReportWarning]:
    """TPOT as the field defines it, (latency - TTFT) / (output tokens - 1), against what the same
    run's mean latency and mean TTFT imply. guidellm's TPOT weighs each request by its output
    tokens - 1, so the two agree for any mix of lengths: a gap means the TPOT column was not
    measured on the same tokens as the latency (farm/analysis/definitions.py)."""
    m = rec.metrics
    n = rec.output_tokens_per_request or output_tokens
    if not n or n <= 1 or not all(k in m for k in ("latency_mean_s", "ttft_mean_ms", "tpot_mean_ms")):
        return []
    implied = (m["latency_mean_s"] * 1000 - m["ttft_mean_ms"]) / (n - 1)
    if implied <= 0 or abs(m["tpot_mean_ms"] - implied) / implied <= TPOT_TOLERANCE:
        return []
    apart = abs(m["tpot_mean_ms"] - implied) / implied * 100
    p95 = f"; P95 TPOT {m['tpot_p95_ms']:.2f} ms" if "tpot_p95_ms" in m else ""
    mean_n = "" if output_tokens else " (the mean from the run's totals)"
    why = _tpot_why(m, implied, n)
    return [_warn("tpot_inconsistent", rec, f"mean TPOT {m['tpot_mean_ms']:.2f} ms, but (mean latency - mean TTFT) / "
                  f"(output tokens{mean_n} - 1) = ({m['latency_mean_s'] * 1000:.0f} - {m['ttft_mean_ms']:.0f}) / "
                  f"{n - 1:.0f} = {implied:.2f} ms ({apart:.0f} % apart){p95}" + (f": {why}" if why else ""),
                  size=apart)]


def _tpot_why(m: dict, implied: float, n: float) -> str:
    """What the gap says about how the TPOT column was measured (bench/reasoning/README.md)."""
    tpot, itl, ttft = m["tpot_mean_ms"], m.get("itl_mean_ms"), m["ttft_mean_ms"]
    latency_ms = m["latency_mean_s"] * 1000
    if itl == 0 and abs(tpot - ttft / n) <= 0.02 * tpot:
        return (f"TPOT equals mean TTFT / output tokens ({ttft / n:.2f} ms) and ITL is 0: the client timed each "
                f"request's first chunk only, as a client that reads no `reasoning` deltas does when a "
                f"`--reasoning-parser` streams the whole answer as reasoning (bench/reasoning/README.md)")
    if tpot < implied:
        head = f"the TPOT column is {implied / tpot:.1f} x too small for the run's own latency: "
        gaps, ok = m.get("timed_token_gaps"), m.get("successful_requests")
        if gaps and ok and abs(gaps - ok * (n - 1)) <= 0.01 * ok * (n - 1):
            # every token was timed: what is left is the time from a request's last token to its end
            return head + (f"the client timed every token ({gaps:.0f} gaps), so the requests ended "
                           f"~{(implied - tpot) * (n - 1):.0f} ms after their last token on average (the end of the "
                           f"stream, which the latency counts and TPOT, as vLLM's, does not): a slow server's finish, "
                           f"not a TPOT error")
        fewer = (f" (it timed {gaps:.0f} token gaps of {ok * (n - 1):.0f})" if gaps and ok else
                 " (or the requests ended well after their last token: this run does not say how many tokens its "
                 "client timed)")
        return head + (f"its client timed fewer tokens than the run generated{fewer}, as one that reads no `reasoning` "
                       f"deltas does for the requests whose reasoning never ended (bench/reasoning/README.md)"
                       + (f"; its ITL, {itl:.2f} ms, likewise" if itl else ""))
    if abs(tpot - latency_ms / n) <= 0.02 * tpot:
        return (f"the TPOT column is latency / output tokens ({latency_ms / n:.2f} ms), the first token's wait "
                f"included: the client's time per output token, not TPOT as vLLM and SGLang define it")
    return f"the TPOT column is {tpot / implied:.1f} x the run's own latency per token after the first"


def peak_note(results: Results) -> str | None:
    """guidellm's peak output rate is the maximum of its windowed rate: a property of its windowing,
    not of the run, so it is a note of the report, never a warning (farm ranks on totals)."""
    ratios = [(rec.metrics["peak_output_tps"] / rec.metrics["output_tps"], rec) for rec in results.records
              if rec.measured and rec.metrics.get("peak_output_tps") and rec.metrics.get("output_tps")]
    high = [(r, rec) for r, rec in ratios if r > PEAK_FACTOR]
    if not high:
        return None
    worst, rec = max(high, key=lambda x: x[0])
    return (f"guidellm's peak output rate, the maximum of its windowed rate, reads up to {worst:,.0f} x the mean output "
            f"rate ({len(high)} of {len(ratios)} runs above {PEAK_FACTOR:g} x; largest {rec.label}, {rec.profile}: "
            f"{rec.metrics['peak_output_tps']:,.2f} tok/s): an effect of its short windows, not a rate any run "
            f"sustained; farm does not use it")


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
            "recommendation with; name one with --baseline (farm sweep, farm report, farm analyze) or the study's "
            "`baseline:`")))
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


def check_knob_overridden(results: Results) -> list[ReportWarning]:
    """A knob that asked for a limit the engine did not run with (its log says another), once per trial."""
    out, seen = [], set()
    for rec in results.records:
        if rec.limits is None or not rec.limits.knob_overridden or rec.trial in seen:
            continue
        seen.add(rec.trial)
        out.append(ReportWarning(code="knob_overridden", trial=rec.label, message=(
            f"the engine overrode what its knobs asked ({overrides_text(rec.limits)}, from its log): "
            "the trial measures what it got, not what it asked for")))
    return out


def check_moe_config(results: Results) -> list[ReportWarning]:
    """A trial whose engine ran its default fused-MoE kernel config on a GPU (issue 47), once per trial:
    no tuned file for its expert shape on this GPU shipped with the engine, and tuned kernels are
    reported 8-24 % faster, so its numbers are the default kernels', not a tuned deployment's."""
    out, seen = [], set()
    for rec in results.records:
        prov = rec.provenance
        if prov is None or not prov.gpu or not prov.moe_config or rec.trial in seen:
            continue
        if not prov.moe_config.startswith(("default", "partly tuned")):
            continue
        seen.add(rec.trial)
        out.append(ReportWarning(code="moe_default_config", trial=rec.label, message=(
            f"ran the engine's default fused-MoE kernel config on {prov.gpu} ({prov.moe_config}): no tuned "
            "config for this expert shape and GPU came with the engine, and tuned ones are reported 8-24 % "
            "faster; these numbers are the default kernels'")))
    return out


def check_warnings(results: Results, selection: Selection, rate: RateAnalysis | None = None) -> list[ReportWarning]:
    """Every check of issue 3 point 6 over every run, then the study-level ones."""
    out: list[ReportWarning] = []
    for rec in results.records:
        if not rec.measured:
            continue
        profile = results.profiles.get(rec.profile)
        out += check_rate(rec)
        out += check_tpot(rec, profile.output_tokens if profile else None)
        out += check_itl(rec)
    out += check_knob_overridden(results)
    out += check_moe_config(results)
    out += check_rate_conclusion(rate, selection)
    out += check_single_runs(results)
    out += check_selection(selection, results)
    out += check_evidence(selection, results)
    out += check_contradiction(selection, results)
    out += order_warnings(results)  # a first run or a drift within an engine start, never pooled silently
    order = WARNING_CODES + EVIDENCE_CODES
    return sorted(out, key=lambda w: order.index(w.code) if w.code in order else len(order))


def _fmt_pct(x: float | None, signed: bool = True) -> str:
    return "n/a" if x is None else (f"{x:+.2f} %" if signed else f"{x:.2f} %")


def decision_word(d) -> str:
    """A DiffStat's decision in a word or three: 'better', 'equivalent within ±3 %', 'undecided'."""
    if d.decision == "equivalent" and d.margin_pct is not None:
        return f"equivalent within \u00b1{d.margin_pct:g} %"
    return d.decision or ""


def machines_text(d) -> str:
    """Where a comparison's runs ran, said where it is not every run on one machine: '; within machines
    X, Y' or '; across machines (...), through C: ...' (farm/analysis/stats/blocks.py)."""
    return f"; {d.machines_note}" if d.machines in ("within", "via_control") and d.machines_note else ""


def interval_text(d, *, decided: bool = True) -> str:
    """A DiffStat as '+4.10 % [+1.20, +7.00], Holm p = 0.012, better' (or why it cannot be told), with
    the machines it was made on where they are not one; `decided=False` leaves the decision out."""
    if d is None:
        return "n/a"
    if d.machines == "no_shared_control":
        return f"n/a ({d.machines_note}: never decided from pooled runs)"
    if d.ci_low_pct is None or d.ci_high_pct is None:
        if min(d.n_a, d.n_b) < 2:
            return f"{_fmt_pct(d.relative_pct)} (single runs: no interval, no test)"
        return f"{_fmt_pct(d.relative_pct)} (cannot tell: {d.note or 'no interval'})"
    p = f", Holm p = {d.p_holm:.3g}" if d.p_holm is not None else ""
    word = f", {decision_word(d)}" if decided and d.decision else ""
    return f"{_fmt_pct(d.relative_pct)} [{d.ci_low_pct:+.2f}, {d.ci_high_pct:+.2f}]{p}{word}{machines_text(d)}"


def decision_text(d: DiffStat, tick=lambda s: s, alpha: float = FAMILY_ALPHA) -> str:
    """One comparison's decision as one line of the Conclusion: a winner with its interval, a proven
    equivalence, or what more runs would buy."""
    a, b = tick(d.a), tick(d.b)
    if d.machines == "no_shared_control":
        return (f"{a} vs {b}: cannot be decided, {d.machines_note}; a trial run on a machine of each (the baseline, "
                f"say) would bridge them")
    if d.decision in ("better", "worse"):
        return f"{a} is {d.decision} than {b}: {interval_text(d, decided=False)}"
    if d.decision == "equivalent":
        return (f"{a} and {b} are equivalent within \u00b1{d.margin_pct:g} %: {_fmt_pct(d.relative_pct)}, "
                f"{(1 - 2 * alpha) * 100:g} % interval [{d.eq_low_pct:+.2f}, {d.eq_high_pct:+.2f}] %{machines_text(d)}")
    head = f"{a} vs {b}: cannot tell yet: {interval_text(d, decided=False)}"
    if d.ci_low_pct is None or d.ci_high_pct is None:
        return head + "; at least 2 runs each give a first interval"
    if d.runs_each is None:
        return head + f"; no number of runs up to {MAX_RUNS_EACH} each would decide it at the current noise"
    return head + f"; {_more(d.more_runs)} each ({d.runs_each} each) would decide it at the current noise"


def _more(n: int) -> str:
    return f"{n} more run" + ("" if n == 1 else "s")


def flipped(d: DiffStat) -> DiffStat:
    """b against a: the ratio inverted (exact on the ratio scale), its intervals and decision turned round."""
    def inv(x: float | None) -> float | None:
        return None if x is None else (100 / (1 + x / 100) - 100)

    turn = {"better": "worse", "worse": "better"}
    return d.model_copy(update=dict(
        a=d.b, b=d.a, relative_pct=inv(d.relative_pct), ci_low_pct=inv(d.ci_high_pct), ci_high_pct=inv(d.ci_low_pct),
        eq_low_pct=inv(d.eq_high_pct), eq_high_pct=inv(d.eq_low_pct), n_a=d.n_b, n_b=d.n_a,
        decision=turn.get(d.decision, d.decision), why=""))


@dataclass
class Gain:
    """A trial a section of the report shows significantly faster than the recommended one."""

    profile: str
    trial: str
    section: str
    diff: DiffStat  # the trial against the recommended one: decision `better`


def gains_over_recommended(sel: Selection) -> list[Gain]:
    """Every comparison in the report's sections where another trial is `better` than the
    recommended one, on any profile (one per profile and trial, the first section found): what
    the Conclusion must say, never leave to another section."""
    rec = sel.recommended.trial
    found: list[tuple[str, str, DiffStat | None]] = []
    for v in sel.verdicts:
        found += [(v.profile, "Intervals and verdicts", c) for c in v.comparisons]
    found += [(r.profile, "Conclusion (against the baseline)", r.delta) for r in sel.comparison]
    found += [(sel.primary_profile, "Optimization steps", s.delta) for s in sel.steps]
    if sel.cross_profile is not None:
        found += [(c.profile, "One command for all workloads", c.cost) for c in sel.cross_profile.costs
                  if c.cost.a != c.cost.b]
    found += [(m.profile, "Engines profile by profile", m.diff) for m in sel.engine_matchups]
    out: dict[tuple[str, str], Gain] = {}
    for profile, section, d in found:
        if d is None or d.decision not in ("better", "worse") or rec not in (d.a, d.b) or d.a == d.b:
            continue
        mine = d if d.b == rec else flipped(d)  # other against the recommended one
        if mine.decision == "better":
            out.setdefault((profile, mine.a), Gain(profile=profile, trial=mine.a, section=section, diff=mine))
    return list(out.values())


def check_contradiction(selection: Selection, results: Results) -> list[ReportWarning]:
    """A recommendation that another section shows significantly slower, on the profile it was chosen
    for: the Conclusion says so (never silently), and so does this check."""
    labels = {r.trial: r.label for r in results.records}
    out = []
    for g in gains_over_recommended(selection):
        if g.profile != selection.primary_profile:
            continue
        out.append(ReportWarning(code="contradiction", trial=labels.get(selection.recommended.trial),
                                 profile=g.profile, message=(
            f"the recommendation {labels.get(selection.recommended.trial)} is significantly slower than "
            f"{labels.get(g.trial, g.trial)} on {g.profile}, the profile it was chosen for (\"{g.section}\"): "
            f"{interval_text(g.diff)}; the {selection.strategy} strategy chose it all the same")))
    return out


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
