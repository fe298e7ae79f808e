"""The `stepwise` strategy: the seed's method replayed along the ordered steps of a grid."""

from __future__ import annotations

from farm.analysis.records import Results, canonical_flag, config_key, flag_set
from farm.analysis.selection.models import SelectionSettings, StepDef, StepRow, Verdict
from farm.analysis.selection.rules import Cell, Table, delta_pct
from farm.engines import render_flags

# --------------------------------------------------------------------------------------
# strategies


def _best(cells: list[Cell]) -> Cell | None:
    eligible = [c for c in cells if c.eligible and c.control_of is None]
    # max() keeps the first of equals: ties go to the trial recorded first (the grid's order).
    return max(eligible, key=lambda c: c.score) if eligible else None


def _step_trial(step: StepDef, table: Table, results: Results) -> str | None:
    trial = table.by_key.get(config_key(step.engine, step.model, step.flags))
    if trial:
        return trial
    # The same step may have been measured with another model path or launcher-level flag set;
    # its name still says which run it is.
    named = {r.trial for r in results.records if r.name == step.name or r.id == step.name}
    return named.pop() if len(named) == 1 else None


def _added_flags(step: StepDef, base: StepDef | None, settings: SelectionSettings) -> list[str]:
    """What the step changes: flags beyond its base step's (or, for an engine step, beyond the required ones)."""
    before = flag_set(base.flags) if base else flag_set(settings.required_flags.get(step.engine, {}))
    return [f for f in render_flags(step.flags) if canonical_flag(f) not in before]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f} %"


def _unjudged(trial: str | None, cell: Cell | None) -> tuple[Verdict, str] | None:
    if trial is None or cell is None:
        return "not_measured", "no run of this configuration on the primary profile"
    if not cell.eligible:
        return "not_eligible", cell.reason or "not eligible"
    return None


def stepwise(table: Table, results: Results, settings: SelectionSettings, baseline: str | None) -> tuple[list[StepRow], str | None]:
    """Replay the seed's method: the fastest engine on defaults, then keep a step only if it beats its base."""
    primary = settings.primary_profile
    defs = {s.name: s for s in settings.steps}
    trials = {s.name: _step_trial(s, table, results) for s in settings.steps}
    cells = {name: table.get(t, primary) for name, t in trials.items()}
    if not any(c is not None for c in cells.values()):
        return [], None
    base_cell = table.get(baseline, primary)
    verdicts: dict[str, tuple[Verdict, str]] = {}
    roots = [s.name for s in settings.steps if s.after is None]
    for name in roots:
        verdicts[name] = _unjudged(trials[name], cells[name]) or ("kept", "")
    contenders = [n for n in roots if verdicts[n][0] == "kept"]
    winner = max(contenders, key=lambda n: cells[n].score) if contenders else None
    for name in contenders:
        if name == winner:
            others = len(roots) - 1
            verdicts[name] = ("kept", "fastest engine on defaults" if others else "the starting point")
        else:
            d = delta_pct(cells[name].score, cells[winner].score)
            verdicts[name] = ("rejected", f"slower on defaults than {winner} ({cells[name].score:.2f} vs "
                                          f"{cells[winner].score:.2f}, {_pct(d)})")
    for step in settings.steps:
        if step.after is None:
            continue
        before = verdicts.get(step.after)
        if before is None or before[0] != "kept":
            verdicts[step.name] = ("skipped", f"builds on {step.after}, which was not kept")
            continue
        judged = _unjudged(trials[step.name], cells[step.name])
        if judged:
            verdicts[step.name] = judged
            continue
        new, old = cells[step.name].score, cells[step.after].score
        if new > old:
            verdicts[step.name] = ("kept", f"beats {step.after} ({new:.2f} vs {old:.2f}, {_pct(delta_pct(new, old))})")
        else:
            verdicts[step.name] = ("rejected", f"lower than the step before, {step.after} "
                                               f"({new:.2f} vs {old:.2f}, {_pct(delta_pct(new, old))})")
    rows = []
    for step in settings.steps:
        cell, base = cells[step.name], cells.get(step.after) if step.after else None
        value = cell.score if cell else None
        after_value = base.score if base else None
        verdict, reason = verdicts[step.name]
        rows.append(StepRow(
            step=step.name, trial=trials[step.name], after=step.after,
            added_flags=_added_flags(step, defs.get(step.after) if step.after else None, settings),
            model_changed=bool(step.after and defs[step.after].model != step.model),
            total_tps=value, after_total_tps=after_value,
            delta_pct=delta_pct(value, after_value) if value is not None and after_value else None,
            delta_vs_baseline_pct=delta_pct(value, base_cell.score) if value is not None and base_cell and base_cell.score else None,
            verdict=verdict, reason=reason,
        ))
    kept = [n for n in defs if verdicts[n][0] == "kept"]
    choice = max(kept, key=lambda n: cells[n].score) if kept else None
    return rows, trials[choice] if choice else None
