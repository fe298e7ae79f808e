"""Comparison tables and statistics: intervals, verdicts, one command across workloads, nodes,
Pareto fronts, edges of the grid."""

from __future__ import annotations

from farm.analysis import stats as fstats
from farm.analysis.limits import limits_apart
from farm.analysis.records import Results, RunRecord, canonical_flag, flag_set
from farm.study.repeats import FAMILY_ALPHA
from farm.analysis.selection.models import (
    SINGLE_RUN_NOISE,
    STAT_METRICS,
    ComparisonRow,
    CrossProfile,
    CrossProfileCost,
    CrossProfileRow,
    DiffStat,
    EngineLead,
    EngineRow,
    MetricStats,
    NodeCheck,
    NodeRow,
    ProfileVerdict,
    SelectionSettings,
    StepRow,
    TrialRow,
    Unmeasured,
)
from farm.analysis.selection.machines import cell_difference, controls_on, copies_of, side_blocks
from farm.analysis.selection.rules import (
    Cell,
    Table,
    _ordered,
    build_table,
    default_trial,
    delta_pct,
    find_baseline,
    serve_command,
)
from farm.analysis.selection.stepwise import stepwise

# --------------------------------------------------------------------------------------
# comparison tables


def _missing_reason(cell: Cell | None) -> str:
    if cell is None:
        return "not measured on this profile"
    return f"no successful run ({cell.reason})"


def compare(table: Table, results: Results, baseline: str, recommended: str, alpha: float = FAMILY_ALPHA,
            metric: str = "total_tps", margin: float = fstats.DEFAULT_MARGIN) -> tuple[list[ComparisonRow], list[Unmeasured]]:
    rows, missing = [], []
    for profile in results.profiles_with_runs():
        b, r = table.get(baseline, profile), table.get(recommended, profile)
        b_ok, r_ok = b is not None and b.score is not None, r is not None and r.score is not None
        if b_ok and r_ok:
            notes = [f"{role} {c.reason}" for role, c in (("baseline", b), ("recommended", r)) if not c.eligible]
            rows.append(ComparisonRow(
                profile=profile, baseline_total_tps=b.score, recommended_total_tps=r.score,
                delta_pct=delta_pct(r.score, b.score) or 0.0,
                baseline_tpot_mean_ms=b.mean("tpot_mean_ms"), recommended_tpot_mean_ms=r.mean("tpot_mean_ms"),
                note="; ".join(notes) or None,
                delta=cell_diff_stat(table, r, b, metric, alpha, margin) if recommended != baseline else None,
            ))
            continue
        if not b_ok:
            missing.append(Unmeasured(profile=profile, role="baseline", trial=table.first[baseline].label, reason=_missing_reason(b)))
        if not r_ok:
            missing.append(Unmeasured(profile=profile, role="recommended", trial=table.first[recommended].label,
                                      reason=_missing_reason(r)))
    holm_fill([row.delta for row in rows if row.delta is not None], alpha)
    return rows, missing


def engine_comparison(table: Table, settings: SelectionSettings, profile: str) -> tuple[list[EngineRow], EngineLead | None]:
    engines = _ordered([r.engine for r in table.first.values()], settings.engine_order)
    rows = []
    for engine in engines:
        trial = default_trial(table, engine, settings)
        cell = table.get(trial, profile)
        if cell is None:
            continue
        rows.append(EngineRow(engine=engine, trial=table.first[trial].label, model=table.first[trial].model,
                              total_tps=cell.score, tpot_mean_ms=cell.mean("tpot_mean_ms"), eligible=cell.eligible,
                              limits=table.first[trial].limits))
    ranked = sorted((r for r in rows if r.total_tps is not None), key=lambda r: -r.total_tps)
    if len(ranked) < 2:
        return rows, None
    lead, second = ranked[0], ranked[1]
    tpot_ms = tpot_pct = None
    if lead.tpot_mean_ms is not None and second.tpot_mean_ms:
        tpot_ms = second.tpot_mean_ms - lead.tpot_mean_ms
        tpot_pct = tpot_ms / second.tpot_mean_ms * 100
    return rows, EngineLead(profile=profile, leader=lead.engine, runner_up=second.engine,
                            total_tps_ahead=lead.total_tps - second.total_tps,
                            total_tps_ahead_pct=delta_pct(lead.total_tps, second.total_tps) or 0.0,
                            tpot_lower_ms=tpot_ms, tpot_lower_pct=tpot_pct,
                            limits_apart=limits_apart(lead.limits, second.limits, names=(lead.engine, second.engine)))


def _trial_rows(table: Table, confidence: float = 1 - FAMILY_ALPHA) -> list[TrialRow]:
    rows = []
    for (trial, profile), cell in table.cells.items():
        rec = table.first[trial]
        base = cell.control_of
        reason = cell.reason
        if base is not None and cell.eligible:
            reason = f"node control: {table.first[base].label if base in table.first else base} repeated on one node"
        summaries = {m: s for m in STAT_METRICS if (s := metric_stats(cell.values(m), confidence)) is not None}
        rows.append(TrialRow(
            id=trial, name=rec.name, engine=rec.engine, model=rec.model, flags=rec.cli_flags, profile=profile,
            runs=[r.id for r in cell.records], repeats=len(cell.runs_ok), total_tps=cell.mean("total_tps"),
            tps_from_totals=cell.mean("tps_from_totals"), tpot_mean_ms=cell.mean("tpot_mean_ms"),
            success_rate=cell.success_rate, eligible=cell.eligible and base is None, reason=reason,
            stats=summaries, nodes=sorted({r.node for r in cell.records if r.node}), node_control_of=base,
            slo_broken=list(cell.slo_broken),
        ))
    return rows


# --------------------------------------------------------------------------------------
# statistics: intervals, verdicts, one command across workloads, nodes, Pareto, edges


def metric_stats(values: list[float], confidence: float = 1 - FAMILY_ALPHA) -> MetricStats | None:
    if not values:
        return None
    s = fstats.summarize(values, confidence=confidence)
    return MetricStats(n=s.n, mean=s.mean, std=s.std, ci_low=s.ci_low, ci_high=s.ci_high, confidence=confidence)


def _pct_or_none(x: float | None) -> float | None:
    return None if x is None else x * 100


def _decided_fields(decided: fstats.Decided) -> dict:
    return dict(decision=decided.decision, margin_pct=decided.margin * 100, eq_low_pct=_pct_or_none(decided.eq_low),
                eq_high_pct=_pct_or_none(decided.eq_high), p_equivalent=decided.p_equivalent,
                runs_each=decided.runs_each, more_runs=decided.more_runs, why=decided.why)


def _machine_fields(d: fstats.Diff) -> dict:
    return dict(machines=d.machines, machines_note=d.machines_note, control=d.control)


def diff_stat(a: str, b: str, a_values: list[float], b_values: list[float], alpha: float = FAMILY_ALPHA,
              margin: float = fstats.DEFAULT_MARGIN, diff: fstats.Diff | None = None) -> DiffStat:
    """a against b on the ratio scale, decided unadjusted (p_holm = p until `holm_fill` adjusts a family);
    `diff`: the difference already made (by machine), in place of one over the values."""
    d = diff or fstats.relative_difference(a_values, b_values, confidence=1 - alpha, method="log")
    decided = fstats.decide(d, p_adjusted=d.p_value, alpha=alpha, margin=margin)
    out = DiffStat(a=a, b=b, relative_pct=_pct_or_none(d.relative), ci_low_pct=_pct_or_none(d.ci_low),
                   ci_high_pct=_pct_or_none(d.ci_high), p_value=d.p_value, p_holm=d.p_value,
                   significant=None if d.p_value is None else d.p_value < alpha, n_a=d.n_a, n_b=d.n_b, note=d.note,
                   **_decided_fields(decided), **_machine_fields(d))
    out._diff = d
    return out


def cell_diff_stat(table: Table, a: Cell, b: Cell, metric: str, alpha: float = FAMILY_ALPHA,
                   margin: float = fstats.DEFAULT_MARGIN) -> DiffStat:
    """Two trials' cells compared by machine (farm/analysis/selection/machines.py), decided unadjusted."""
    return diff_stat(a.trial, b.trial, [], [], alpha, margin, diff=cell_difference(table, a, b, metric, 1 - alpha))


def holm_fill(diffs: list[DiffStat], alpha: float) -> None:
    """Holm-adjust a family of comparisons in place, and decide each again with its adjusted p (the
    untestable ones stay untested)."""
    testable = [d for d in diffs if d.p_value is not None]
    for d, p in zip(testable, fstats.holm([d.p_value for d in testable])):
        d.p_holm = p
        d.significant = p < alpha
        if d._diff is not None and d.margin_pct is not None:
            decided = fstats.decide(d._diff, p_adjusted=p, alpha=alpha, margin=d.margin_pct / 100, family=len(testable))
            for k, v in _decided_fields(decided).items():
                setattr(d, k, v)


def complexity_of(rec: RunRecord, settings: SelectionSettings, baseline_model: str | None = None) -> int:
    """Non-default choices of a configuration: flags beyond its engine's required ones, plus one for
    serving another model than the baseline's (e.g. a quantized variant)."""
    required = flag_set(settings.required_flags.get(rec.engine, {}))
    n = sum(1 for f in rec.cli_flags if canonical_flag(f) not in required)
    return n + (1 if baseline_model is not None and rec.model != baseline_model else 0)


def _keys(table: Table, trials: list[str]) -> dict[str, str]:
    """Trial id -> the name it goes by in verdict texts (its label, when labels are unique)."""
    labels = {t: table.first[t].label for t in trials}
    return labels if len(set(labels.values())) == len(labels) else {t: t for t in trials}


def candidates_on(table: Table, profile: str, metric: str) -> list[Cell]:
    """Eligible, ranked cells of a profile: node controls are never candidates."""
    return [c for c in table.on(profile) if c.eligible and c.control_of is None and c.values(metric)]


def _controls_less_copies(table: Table, profile: str, metric: str, cells: list[Cell], key: dict[str, str]):
    """The profile's controls, less the copies whose runs already count as their trial's (side_blocks)."""
    copies = {key.get(c.trial, c.trial) for cell in cells for c in copies_of(table, cell)}
    controls = (c.without(copies) if copies else c for c in controls_on(table, profile, metric, names=key))
    return [c for c in controls if c is not None]


def profile_verdict(table: Table, profile: str, settings: SelectionSettings, baseline: str | None,
                    metric: str = "total_tps") -> ProfileVerdict | None:
    cells = candidates_on(table, profile, metric)
    if not cells:
        return None
    trials = [c.trial for c in cells]
    key = _keys(table, trials)
    back = {v: k for k, v in key.items()}
    base_model = table.first[baseline].model if baseline in table.first else None
    complexity = {t: complexity_of(table.first[t], settings, base_model) for t in trials}
    base_ok = baseline if baseline in trials else None
    v = fstats.compare_winner({key[c.trial]: c.values(metric) for c in cells}, baseline=key.get(base_ok),
                              alpha=settings.alpha, complexity={key[t]: n for t, n in complexity.items()},
                              margin=settings.equivalence_margin,
                              blocks={key[c.trial]: side_blocks(table, c, metric) for c in cells},
                              controls=_controls_less_copies(table, profile, metric, cells, key))
    comparisons = []
    for c in v.comparisons:
        d = c.diff
        row = DiffStat(a=back[c.a], b=back[c.b], relative_pct=_pct_or_none(d.relative),
                       ci_low_pct=_pct_or_none(d.ci_low), ci_high_pct=_pct_or_none(d.ci_high),
                       p_value=d.p_value, p_holm=c.p_adjusted, significant=c.significant,
                       n_a=d.n_a, n_b=d.n_b, note=d.note, roles=list(c.roles), **_decided_fields(c.decided),
                       **_machine_fields(d))
        row._diff = d
        comparisons.append(row)
    return ProfileVerdict(
        profile=profile, decision=v.decision, recommended=back[v.recommended],
        winner=back[v.winner] if v.winner else None, leader=back[v.leader],
        runner_up=back[v.runner_up] if v.runner_up else None, baseline=base_ok, alpha=settings.alpha,
        margin=settings.equivalence_margin, equivalent=[back[k] for k in v.equivalent], comparisons=comparisons,
        complexity=complexity, candidates=len(cells), reason=v.reason,
    )


def cross_profile(table: Table, results: Results, settings: SelectionSettings, baseline: str | None,
                  verdicts: list[ProfileVerdict], metric: str = "total_tps") -> CrossProfile | None:
    """The configuration with the best worst-case gain over the baseline on every profile."""
    profiles = results.profiles_with_runs()
    if baseline is None or len(profiles) < 2:
        return None
    per_profile = {p: {c.trial: c.score for c in candidates_on(table, p, metric)} for p in profiles}
    winners = {v.profile: v.recommended for v in verdicts if baseline in per_profile.get(v.profile, {})}
    try:
        ranking = fstats.worst_case_relative(per_profile, baseline, profile_winners=winners)
    except ValueError:  # the baseline is eligible nowhere
        return None
    if len(ranking.profiles) < 2:
        return None
    rows = [CrossProfileRow(trial=e.trial, worst_case_pct=_pct_or_none(e.worst_case_relative), worst_profile=e.worst_profile,
                            geomean_pct=_pct_or_none(e.geomean_relative), comparable=e.comparable,
                            missing_profiles=e.missing_profiles) for e in ranking.entries]
    out = CrossProfile(profiles=ranking.profiles, profiles_left_out=ranking.profiles_without_baseline, baseline=baseline,
                       recommended=ranking.recommended, ranking=rows)
    if ranking.recommended is None:
        return out
    pick = next(e for e in ranking.entries if e.trial == ranking.recommended)
    costs = []
    for pc in pick.per_profile:
        winner = ranking.profile_winners[pc.profile]
        costs.append(CrossProfileCost(
            profile=pc.profile, winner=winner, total_tps=pc.mean, winner_total_tps=per_profile[pc.profile][winner],
            vs_baseline_pct=pc.relative_to_baseline * 100,
            cost=cell_diff_stat(table, table.get(pick.trial, pc.profile), table.get(winner, pc.profile), metric,
                                settings.alpha, settings.equivalence_margin)))
    holm_fill([c.cost for c in costs if c.cost.a != c.cost.b], settings.alpha)
    return out.model_copy(update={"costs": costs, "worst_case_pct": _pct_or_none(pick.worst_case_relative),
                                  "worst_profile": pick.worst_profile, "geomean_pct": _pct_or_none(pick.geomean_relative),
                                  "command": serve_command(table.first[pick.trial], settings)})


def node_check(table: Table, settings: SelectionSettings, baseline: str | None, metric: str = "total_tps") -> NodeCheck | None:
    """The baseline's configuration (itself and its node controls) by node, on the primary profile."""
    if baseline is None:
        return None
    key = table.first[baseline].key
    cells = [table.get(t, settings.primary_profile) for t, rec in table.first.items()
             if rec.key == key and (t == baseline or rec.node_control_of == baseline)]
    runs = [r for c in cells if c is not None for r in c.runs_ok]
    by_node: dict[str, list[float]] = {}
    for r in runs:
        if (v := r.metric(metric)) is not None:
            by_node.setdefault(r.node or "unknown", []).append(v)
    if len(by_node) < 2:
        return None
    confidence = 1 - settings.alpha
    rows = []
    for node, values in sorted(by_node.items()):
        others = [v for n, vs in by_node.items() if n != node for v in vs]
        rows.append(NodeRow(node=node, runs=len(values), total_tps=metric_stats(values, confidence),
                            vs_others=diff_stat(node, "other nodes", values, others, settings.alpha,
                                                settings.equivalence_margin)))
    holm_fill([r.vs_others for r in rows], settings.alpha)
    return NodeCheck(profile=settings.primary_profile, trial=baseline, nodes=rows,
                     effect=any(r.vs_others.significant for r in rows))


def pareto(table: Table, metric: str = "total_tps") -> dict[str, list[str]]:
    """Per profile, the eligible trials no other beats on both throughput and mean TPOT."""
    out = {}
    for profile in dict.fromkeys(p for _, p in table.cells):
        points = [(c.trial, c.score, tpot) for c in candidates_on(table, profile, metric)
                  if (tpot := c.mean("tpot_mean_ms")) is not None]
        if points:
            out[profile] = fstats.pareto_front(points)
    return out


def _number(text: str) -> int | float | None:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def edges(table: Table, settings: SelectionSettings, metric: str = "total_tps") -> list[fstats.EdgeWarning]:
    """Numeric flags whose best value (best eligible trial with it, primary profile) is the smallest
    or largest tried."""
    cells = candidates_on(table, settings.primary_profile, metric)
    engines = {table.first[c.trial].engine for c in cells}
    best: dict[str, dict[int | float, float]] = {}
    for c in cells:
        rec = table.first[c.trial]
        for name, value in rec.flags.items():
            # a bare flag (true) or a JSON value is not a number on a scale
            number = None if isinstance(value, (bool, dict, list)) else _number(str(value))
            if number is None:
                continue
            knob = f"--{name}" + (f" ({rec.engine})" if len(engines) > 1 else "")
            have = best.setdefault(knob, {})
            have[number] = max(have.get(number, c.score), c.score)
    return fstats.edge_warnings(best)


def unseparated(table: Table, settings: SelectionSettings, recommended: str, verdict: ProfileVerdict | None,
                metric: str = "total_tps") -> list[str]:
    """Single runs: the eligible trials within `SINGLE_RUN_NOISE` of the recommendation (it included).

    With repeats the verdict says what the data separate; with one run per trial nothing can be
    tested, and differences below the assumed run-to-run noise are not evidence of anything.
    """
    if verdict is None or verdict.decision != "cannot_tell":
        return []
    rec_cell = table.get(recommended, settings.primary_profile)
    if rec_cell is None or not rec_cell.score:
        return []
    near = [c.trial for c in candidates_on(table, settings.primary_profile, metric)
            if abs(c.score / rec_cell.score - 1) <= SINGLE_RUN_NOISE]
    return near if len(near) > 1 else []


def _step_significance(rows: list[StepRow], table: Table, settings: SelectionSettings, metric: str) -> None:
    """Each measured step against the step it builds on (an engine step against the fastest engine
    on defaults); Holm over the steps. A step the replay skipped (it builds on one not kept) is
    judged too: the question a seed step asks (does this flag help on top of the one before?) has
    an answer whatever the replay kept, and `--repeats auto` refines exactly these decisions."""
    by_step = {r.step: r for r in rows}
    roots = [r for r in rows if r.after is None and r.verdict == "kept"]
    judged = []
    for row in rows:
        if row.verdict not in ("kept", "rejected", "skipped") or row.trial is None:
            continue
        other = by_step.get(row.after) if row.after else (roots[0] if roots and roots[0] is not row else None)
        if other is None or other.trial is None:
            continue
        a, b = table.get(row.trial, settings.primary_profile), table.get(other.trial, settings.primary_profile)
        if a is None or b is None or not (a.eligible and b.eligible):
            continue
        row.delta = cell_diff_stat(table, a, b, metric, settings.alpha, settings.equivalence_margin)
        judged.append(row)
    holm_fill([r.delta for r in judged], settings.alpha)
    for row in judged:
        d = row.delta
        row.significance = "cannot_tell" if d.significant is None else ("significant" if d.significant else "not_significant")


def decision_table(results: Results, settings: SelectionSettings, metric: str) -> Table:
    """The table the report decides from (its baseline found), built once for every decision a
    `--repeats auto` pass asks of it."""
    table = build_table(results, metric, settings.min_success_rate, settings.slo)
    table.baseline = find_baseline(table, results, settings)
    return table


def step_decisions(table: Table, results: Results, settings: SelectionSettings, metric: str) -> list[StepRow]:
    """The ordered steps as the report judges them: the stepwise replay, then each measured step
    against the step it builds on, by machine, Holm over the steps. What `--repeats auto` refines
    in a study of ordered steps (farm/analysis/plan.py), so the plan and the report decide alike."""
    rows, _ = stepwise(table, results, settings, table.baseline)
    _step_significance(rows, table, settings, metric)
    return rows


def blocked_candidates(table: Table, settings: SelectionSettings, metric: str
                       ) -> tuple[dict[str, list[float]], dict[str, dict[str, list[float]]], list[fstats.Control]]:
    """The primary profile's candidates as `profile_verdict` compares them: each trial's values, its
    runs by machine (its copies' included) and the controls that may bridge machines, keyed by
    trial id: what `--repeats auto` decides by (its samples; by machine where the grid has no
    ordered steps)."""
    cells = candidates_on(table, settings.primary_profile, metric)
    key = {c.trial: c.trial for c in table.on(settings.primary_profile)}
    return ({c.trial: c.values(metric) for c in cells}, {c.trial: side_blocks(table, c, metric) for c in cells},
            _controls_less_copies(table, settings.primary_profile, metric, cells, key))
