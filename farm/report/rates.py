"""The throughput-from-totals analysis: would the recommendation change on the recomputed rate?"""

from __future__ import annotations

from farm.analysis.records import Results
from farm.analysis.select import (
    STRATEGIES,
    Selection,
    SelectionSettings,
    build_table,
    delta_pct,
    select,
)
from farm.errors import UserError
from farm.report.models import (
    RATE_TOLERANCE,
    RateAnalysis,
    RateChoice,
    RateGain,
    RateRow,
)


def other_metric(results: Results) -> str:
    """The rate to check `total_tps` against.

    A results file like the seed's records its client's figure as `total_tps`: check it against
    tokens / duration. farm records tokens / duration as `total_tps` and guidellm's own mean
    beside it: check against that.
    """
    if any("guidellm_total_tps_mean" in r.metrics for r in results.records if r.measured):
        return "guidellm_total_tps_mean"
    return "tps_from_totals"


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
