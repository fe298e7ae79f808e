"""Selection: which serve command to recommend, computed from run records alone.

The objective is the throughput metric (by default `total_tps` as the records carry it) on the
primary profile, among eligible trials: every run ok and at least `min_success_rate` of the
requests its profile asked for succeeded. Two strategies:

- `best`: the global best of what was measured;
- `stepwise`: the seed's method replayed along the ordered steps of a grid: engines on defaults,
  then each optimization on top of the step it names in `after`, kept only if it beats that step.

With repeats, every difference is judged with farm.analysis.stats: per trial and profile the mean and a
confidence interval of throughput, TTFT and TPOT; on each profile the leader against the
runner-up and the baseline on the ratio scale (Welch on log throughput, Holm over the
comparisons), each comparison a decision: better, worse, equivalent within the study's
`equivalence_margin`, or undecided (with the runs that would decide it). `best` recommends the
simplest of the leader and the trials proven equivalent to it (fewest non-default flags); a trial
merely not yet separated from the leader is not called the same, and the leader is recommended.
Single runs cannot be tested: the leader by mean is recommended, flagged as unconfirmed.

A profile may set SLOs (`slo:` in the study): a trial that breaks one is not eligible there, and
the reason names the limit and the measured value.

Nothing here remembers a best-so-far between calls: the same records always give the same answer.
"""

from __future__ import annotations

from farm.analysis.records import Results
from farm.analysis.selection.comparisons import (
    _step_significance,
    _trial_rows,
    compare,
    complexity_of,
    cross_profile,
    edges,
    engine_comparison,
    node_check,
    pareto,
    profile_verdict,
    unseparated,
)
from farm.analysis.selection.models import (
    METRIC_LABELS,
    DiffStat,
    SINGLE_RUN_NOISE,
    STAT_LABELS,
    STAT_METRICS,
    STRATEGIES,
    ReportWarning,
    Selection,
    SelectionSettings,
    settings_for,
)
from farm.analysis.selection.rules import (
    _chosen,
    build_table,
    delta_pct,
    find_baseline,
    pct_text,
)
from farm.analysis.selection import capacity as capacity_rank
from farm.analysis.selection.stepwise import _best, stepwise
from farm.analysis.selection.engines import engine_matchups
from farm.analysis.stats import MAX_RUNS_EACH
from farm.errors import UserError
from farm.study.repeats import FAMILY_ALPHA

# What the rest of farm imports from here (the pieces live in farm.analysis.selection).
__all__ = ["FAMILY_ALPHA", "MAX_RUNS_EACH", "METRIC_LABELS", "DiffStat", "ReportWarning", "SINGLE_RUN_NOISE", "STAT_LABELS", "STAT_METRICS", "STRATEGIES", "Selection",
           "SelectionSettings", "build_table", "complexity_of", "delta_pct", "find_baseline", "pct_text", "select",
           "settings_for"]

# --------------------------------------------------------------------------------------
# entry point


def select(results: Results, settings: SelectionSettings, strategy: str = "best", metric: str = "total_tps") -> Selection:
    """Recommend a trial from `results`; `UserError` when nothing on the primary profile may be chosen."""
    if strategy not in STRATEGIES:
        raise UserError(f"unknown strategy '{strategy}' (known: {', '.join(STRATEGIES)})", key="--strategy")
    primary = settings.primary_profile
    # Capacity profiles rank by the load each trial serves under the SLO; the tables below see each
    # trial's run at its capacity (farm/analysis/selection/capacity.py).
    capacities = capacity_rank.rankings(results, settings)
    capacity_rank.check_primary(capacities, settings, results.source)
    results = capacity_rank.at_capacity(results, capacities)
    table = build_table(results, metric, settings.min_success_rate, settings.slo)
    on_primary = table.on(primary)
    if not on_primary:
        raise UserError(f"no runs on the primary profile '{primary}'", file=results.source, key="primary_profile")
    best = _best(on_primary)
    if best is None:
        raise UserError(f"no eligible trial on the primary profile '{primary}': every run failed or fell below the "
                        f"minimum success rate {pct_text(settings.min_success_rate)}", file=results.source, key="runs")
    baseline = find_baseline(table, results, settings)
    table.baseline = baseline
    steps, step_choice = stepwise(table, results, settings, baseline)
    _step_significance(steps, table, settings, metric)
    verdicts = [v for p in results.profiles_with_runs() if (v := profile_verdict(table, p, settings, baseline, metric))]
    verdicts = [v for v in verdicts if v.profile not in capacities] + \
        [v for r in capacities.values() if (v := capacity_rank.profile_verdict(r, settings))]
    primary_verdict = next((v for v in verdicts if v.profile == primary), None)
    if strategy == "stepwise":
        if step_choice is None:
            why = ("none of its steps was kept" if steps else "none of its steps was measured") if settings.steps \
                else "the study has no ordered grid of steps"
            raise UserError(f"cannot replay stepwise: {why}", file=results.source, key="--strategy")
        recommended = step_choice
    else:
        # The leader, or the simplest trial proven equivalent to it.
        recommended = primary_verdict.recommended if primary_verdict else best.trial
    comparison, unmeasured = compare(table, results, baseline, recommended, settings.alpha, metric,
                                     settings.equivalence_margin) if baseline else ([], [])
    comparison_profile = settings.engine_comparison_profile or primary
    engines, lead = engine_comparison(table, settings, comparison_profile)
    matchups = engine_matchups(table, settings, results.profiles_with_runs(), metric)
    return Selection(
        strategy=strategy, metric=metric, primary_profile=primary, engine_comparison_profile=comparison_profile,
        min_success_rate=settings.min_success_rate,
        recommended=_chosen(table, recommended, settings),
        baseline=_chosen(table, baseline, settings) if baseline else None,
        best_trial=best.trial, stepwise_trial=step_choice, step_grid=settings.step_grid if steps else None,
        trials=_trial_rows(table, 1 - settings.alpha), comparison=comparison, unmeasured=unmeasured,
        engines=engines, engine_lead=lead, engine_matchups=matchups, steps=steps,
        alpha=settings.alpha, sequential=settings.sequential, equivalence_margin=settings.equivalence_margin,
        verdicts=verdicts,
        # One command for all workloads weighs fixed loads: a capacity run's throughput is at each trial's own load.
        cross_profile=cross_profile(table, results.model_copy(update={"records": [
            r for r in results.records if r.profile not in capacities]}), settings, baseline, verdicts, metric),
        nodes=node_check(table, settings, baseline, metric), pareto=pareto(table, metric),
        edges=edges(table, settings, metric),
        unseparated=[] if primary in capacities else unseparated(table, settings, recommended, primary_verdict, metric),
        capacity=list(capacities.values()),
    )
