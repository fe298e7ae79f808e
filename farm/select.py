"""Selection: which serve command to recommend, computed from run records alone.

The objective is the throughput metric (by default `total_tps` as the records carry it) on the
primary profile, among eligible trials: every run ok and at least `min_success_rate` of the
requests its profile asked for succeeded. Two strategies:

- `best`: the global best of what was measured;
- `stepwise`: the seed's method replayed along the ordered steps of a grid: engines on defaults,
  then each optimization on top of the step it names in `after`, kept only if it beats that step.

Nothing here remembers a best-so-far between calls: the same records always give the same answer.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from farm.errors import UserError
from farm.records import ConfigKey, Results, RunRecord, config_key
from farm.spec import EngineSpec

if TYPE_CHECKING:
    from farm.spec import Study

Strategy = Literal["best", "stepwise"]
STRATEGIES: tuple[str, ...] = ("best", "stepwise")

# Throughput metrics a selection can rank by. `total_tps` is whatever the source recorded under
# that name (the seed: its client's windowed figure; farm: tokens / duration).
METRIC_LABELS = {
    "total_tps": "total_tps as recorded",
    "tps_from_totals": "(input + output tokens) / duration",
    "guidellm_total_tps_mean": "guidellm's windowed mean token rate",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------------------
# settings


class StepDef(_Strict):
    """One named step of an ordered grid: the configuration it measures and the step it builds on."""

    name: str = Field(description="Step name (the grid block's `name`).")
    engine: str = Field(description="Engine of the step.")
    model: str = Field(description="Model the step serves.")
    flags: list[str] = Field(description="Every flag of the step as CLI strings, required ones included.")
    after: str | None = Field(default=None, description="Step it builds on; none for the engine-default steps.")


class SelectionSettings(_Strict):
    """What selection needs from a study, so that selection itself needs no study file."""

    primary_profile: str = Field(description="Profile whose throughput is the objective.")
    engine_comparison_profile: str | None = Field(default=None, description="Profile of the engine comparison; default the primary.")
    min_success_rate: float = Field(default=0.99, ge=0, le=1, description="Eligibility: successful / asked requests.")
    baseline: str | None = Field(default=None, description="Trial id, trial name or run id of the baseline; default engine-default.")
    baseline_from: str = Field(default="baseline", description="Where `baseline` was given (a CLI option or a study key), for errors.")
    required_flags: dict[str, list[str]] = Field(default_factory=dict, description="Engine -> flags every trial of it gets.")
    engine_order: list[str] = Field(default_factory=list, description="Engines in the study's order; the first is the default baseline's.")
    model_order: list[str] = Field(
        default_factory=list, description="Models in the study's order; the first (unquantized) is the default baseline's."
    )
    steps: list[StepDef] = Field(default_factory=list, description="Ordered steps for `stepwise`; empty if the study has none.")
    step_grid: str | None = Field(default=None, description="Grid the steps come from.")
    engines: dict[str, EngineSpec] = Field(default_factory=dict, description="Engine specs, to build serve commands.")


def _step_grid(study: "Study", grid: str | None) -> str | None:
    if grid and study.grids.get(grid) and study.grids[grid].ordered:
        return grid
    # The seed's replay lives in the grid named `seed`; any other ordered grid is a stepwise study too.
    if "seed" in study.grids and study.grids["seed"].ordered:
        return "seed"
    return next((name for name, g in study.grids.items() if g.ordered), None)


def _steps(study: "Study", grid: str | None) -> list[StepDef]:
    from farm.engines import render_flags
    from farm.grid import expand

    if grid is None:
        return []
    return [StepDef(name=t.label, engine=t.engine, model=t.model, flags=render_flags(t.all_flags), after=t.after)
            for t in expand(study, grid)]


def settings_for(results: Results, study: "Study", *, baseline: str | None = None, grid: str | None = None,
                 prefer_results_profile: bool = False) -> SelectionSettings:
    """Selection settings from a study, checked against the results they will judge.

    The primary profile is the study's (or `grid`'s), unless `prefer_results_profile` and the
    results name their own (a sweep's results file analysed without `--config`).
    """
    from farm.engines import render_flags

    with_runs = set(results.profiles_with_runs())
    study_primary = study.grid_primary_profile(grid) if grid else study.primary_profile
    candidates = [results.primary_profile, study_primary] if prefer_results_profile else [study_primary, results.primary_profile]
    primary = next((p for p in candidates if p and p in with_runs), None)
    if primary is None:
        wanted = next(p for p in candidates if p)
        raise UserError(f"no runs on the primary profile '{wanted}' (profiles with runs: {', '.join(sorted(with_runs)) or 'none'})",
                        file=results.source, key="primary_profile")
    comparison = study.engine_comparison_profile if study.engine_comparison_profile in with_runs else primary
    step_grid = _step_grid(study, grid)
    return SelectionSettings(
        primary_profile=primary,
        engine_comparison_profile=comparison,
        min_success_rate=study.min_success_rate,
        baseline=baseline or study.baseline,
        baseline_from="--baseline" if baseline else f"baseline (in {study.source or 'the study'})",
        required_flags={name: render_flags(spec.flags) for name, spec in study.engines.items()},
        engine_order=list(study.engines),
        model_order=[m.name for m in study.models.values()],
        steps=_steps(study, step_grid),
        step_grid=step_grid,
        engines=dict(study.engines),
    )


# --------------------------------------------------------------------------------------
# output models (the JSON object of `farm analyze --format json`)


class ChosenTrial(_Strict):
    """A trial picked by selection (the recommendation or the baseline) and how to serve it."""

    command: str = Field(description="What a user pastes to serve this configuration.")
    trial: str = Field(description="Trial id.")
    name: str | None = Field(default=None, description="Trial name (seed step), if any.")
    engine: str
    model: str
    flags: list[str] = Field(description="Every flag as CLI strings.")
    total_tps: float | None = Field(default=None, description="Its value of the selection metric on the primary profile.")


class TrialRow(_Strict):
    """One trial on one profile: its numbers (mean over its runs) and whether it may be chosen."""

    id: str = Field(description="Trial id.")
    name: str | None = None
    engine: str
    model: str
    flags: list[str]
    profile: str
    runs: list[str] = Field(description="Ids of the runs behind this row.")
    repeats: int = Field(description="Runs with a throughput.")
    total_tps: float | None = Field(description="Mean total_tps as recorded; none when no run succeeded.")
    tps_from_totals: float | None = Field(default=None, description="Mean (input + output tokens) / duration.")
    tpot_mean_ms: float | None = None
    success_rate: float | None = Field(description="Lowest success rate of its runs (successful / asked).")
    eligible: bool
    reason: str | None = Field(default=None, description="Why it is not eligible.")


class ComparisonRow(_Strict):
    """Baseline vs recommendation on one profile where both were measured."""

    profile: str
    baseline_total_tps: float
    recommended_total_tps: float
    delta_pct: float
    baseline_tpot_mean_ms: float | None
    recommended_tpot_mean_ms: float | None
    note: str | None = Field(default=None, description="Set when a side is below the success-rate gate.")


class Unmeasured(_Strict):
    """A profile where the baseline or the recommendation has no number: said, never filled in."""

    profile: str
    role: Literal["baseline", "recommended"]
    trial: str
    reason: str


class EngineRow(_Strict):
    """One engine on defaults (required flags only) on the engine-comparison profile."""

    engine: str
    trial: str
    model: str
    total_tps: float | None
    tpot_mean_ms: float | None
    eligible: bool


class EngineLead(_Strict):
    """How far the fastest engine on defaults is ahead of the next one."""

    profile: str
    leader: str
    runner_up: str
    total_tps_ahead: float = Field(description="Leader minus runner-up, tok/s.")
    total_tps_ahead_pct: float = Field(description="Relative to the runner-up.")
    tpot_lower_ms: float | None = Field(default=None, description="Runner-up minus leader mean TPOT.")
    tpot_lower_pct: float | None = Field(default=None, description="Relative to the runner-up's mean TPOT.")


Verdict = Literal["kept", "rejected", "not_eligible", "not_measured", "skipped"]


class StepRow(_Strict):
    """One step of the stepwise replay with its verdict."""

    step: str
    trial: str | None = Field(description="Trial the step matched in the records; none if never measured.")
    after: str | None
    added_flags: list[str] = Field(description="Flags this step adds to the step it builds on (or the engine's required flags).")
    model_changed: bool = Field(default=False, description="The step serves another model than the step it builds on.")
    total_tps: float | None = Field(description="Its value of the selection metric on the primary profile.")
    after_total_tps: float | None = None
    delta_pct: float | None = Field(default=None, description="Against the step it builds on.")
    delta_vs_baseline_pct: float | None = None
    verdict: Verdict
    reason: str


class ReportWarning(_Strict):
    """Something in the numbers a reader must know before trusting them."""

    code: str = Field(description="rate_mismatch, tpot_inconsistent, peak_implausible, itl_zero, single_run, local_optimum, ...")
    trial: str | None = Field(default=None, description="Trial label it concerns; none for the whole study.")
    profile: str | None = None
    message: str


class Selection(_Strict):
    """Everything selection decided, and the tables that justify it."""

    strategy: Strategy
    metric: str = Field(description="Throughput metric ranked by (see METRIC_LABELS).")
    primary_profile: str
    engine_comparison_profile: str
    min_success_rate: float
    recommended: ChosenTrial
    baseline: ChosenTrial | None
    best_trial: str = Field(description="Global best eligible trial on the primary profile.")
    stepwise_trial: str | None = Field(description="The stepwise replay's choice; none without matched steps.")
    step_grid: str | None = None
    trials: list[TrialRow]
    comparison: list[ComparisonRow]
    unmeasured: list[Unmeasured]
    engines: list[EngineRow]
    engine_lead: EngineLead | None
    steps: list[StepRow]


# --------------------------------------------------------------------------------------
# the table of (trial, profile) cells


def pct_text(fraction: float) -> str:
    """0.516 -> '51.6 %', 0.99 -> '99 %'."""
    return f"{fraction * 100:.1f}".rstrip("0").rstrip(".") + " %"


def delta_pct(new: float, old: float) -> float | None:
    return (new - old) / old * 100 if old else None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass
class Cell:
    """The runs of one trial on one profile, reduced to what selection compares."""

    trial: str
    profile: str
    records: list[RunRecord]
    score: float | None = None
    eligible: bool = False
    reason: str | None = None
    success_rate: float | None = None
    runs_ok: list[RunRecord] = field(default_factory=list)

    def mean(self, metric: str) -> float | None:
        return _mean([v for r in self.runs_ok if (v := r.metric(metric)) is not None])


def _judge(cell: Cell, metric: str, min_rate: float) -> None:
    failed = [r for r in cell.records if not r.measured]
    cell.runs_ok = [r for r in cell.records if r.measured]
    rates = [r.success_rate for r in cell.records if r.success_rate is not None]
    cell.success_rate = min(rates) if rates else None
    cell.score = cell.mean(metric)
    if failed:
        r = failed[0]
        cell.reason = f"{r.status.value}: {r.reason}" if r.reason and r.reason != r.status.value else r.status.value
        if len(cell.records) > 1:
            cell.reason = f"{len(failed)} of {len(cell.records)} runs failed ({cell.reason})"
    elif cell.success_rate is not None and cell.success_rate < min_rate:
        worst = min(cell.records, key=lambda r: r.success_rate if r.success_rate is not None else 1.0)
        ok, asked = worst.metrics.get("successful_requests"), worst.total_requests
        counts = f" ({ok:.0f} of {asked} requests succeeded)" if ok is not None and asked else ""
        lowest = "lowest success rate of its runs" if len(cell.records) > 1 else "success rate"
        cell.reason = f"{lowest} {pct_text(cell.success_rate)} < {pct_text(min_rate)}{counts}"
    elif cell.score is None:
        cell.reason = f"no {METRIC_LABELS.get(metric, metric)} in its runs"
    else:
        cell.eligible = True


@dataclass
class Table:
    """Every (trial, profile) cell plus the facts about each trial, in the records' order."""

    cells: dict[tuple[str, str], Cell]
    first: dict[str, RunRecord]  # trial -> its first record (engine, model, flags, name)
    by_key: dict[ConfigKey, str]

    def get(self, trial: str | None, profile: str) -> Cell | None:
        return self.cells.get((trial, profile)) if trial else None

    def on(self, profile: str) -> list[Cell]:
        return [c for (t, p), c in self.cells.items() if p == profile]


def build_table(results: Results, metric: str, min_success_rate: float) -> Table:
    cells: dict[tuple[str, str], Cell] = {}
    first: dict[str, RunRecord] = {}
    for rec in results.records:
        first.setdefault(rec.trial, rec)
        cells.setdefault((rec.trial, rec.profile), Cell(rec.trial, rec.profile, [])).records.append(rec)
    for cell in cells.values():
        _judge(cell, metric, min_success_rate)
    by_key = {}
    for trial, rec in first.items():
        by_key.setdefault(rec.key, trial)
    return Table(cells, first, by_key)


# --------------------------------------------------------------------------------------
# commands and trial facts


def serve_command(rec: RunRecord, settings: SelectionSettings) -> str:
    """The command to serve `rec`'s configuration, through its engine adapter when farm has one."""
    if rec.command:
        return rec.command
    from farm.engines import ENGINES, parse_cli_flags
    from farm.trial import Trial

    engine = ENGINES.get(rec.engine)
    if engine is None:  # a results file may name an engine farm has no adapter for
        return shlex.join([rec.engine, rec.model, *rec.flags])
    trial = Trial(id=rec.trial, name=rec.name, engine=rec.engine, model_key=rec.model, model=rec.model,
                  flags=parse_cli_flags(rec.flags), profiles=[])
    return engine.serve_command(settings.engines.get(rec.engine) or EngineSpec(), trial)


def _chosen(table: Table, trial: str, settings: SelectionSettings) -> ChosenTrial:
    rec = table.first[trial]
    cell = table.get(trial, settings.primary_profile)
    return ChosenTrial(command=serve_command(rec, settings), trial=trial, name=rec.name, engine=rec.engine,
                       model=rec.model, flags=list(rec.flags), total_tps=cell.score if cell else None)


def _ordered(values: list[str], preferred: list[str]) -> list[str]:
    return [v for v in preferred if v in values] + [v for v in dict.fromkeys(values) if v not in preferred]


def default_trial(table: Table, engine: str, settings: SelectionSettings) -> str | None:
    """The engine-default trial: only the engine's required flags, on the study's first model measured."""
    models = _ordered([r.model for r in table.first.values() if r.engine == engine], settings.model_order)
    for model in models:
        trial = table.by_key.get(config_key(engine, model, settings.required_flags.get(engine, [])))
        if trial:
            return trial
    return None


def _named_trial(table: Table, results: Results, name: str, settings: SelectionSettings) -> str:
    if name in table.first:
        return name
    by_name = {r.trial for r in results.records if r.name == name or r.id == name}
    if len(by_name) == 1:
        return by_name.pop()
    known = ", ".join(sorted({r.label for r in table.first.values()}))
    why = f"'{name}' names {len(by_name)} trials" if by_name else f"no trial or run '{name}' (trials: {known})"
    raise UserError(why, file=results.source, key=settings.baseline_from)


def find_baseline(table: Table, results: Results, settings: SelectionSettings) -> str | None:
    if settings.baseline:
        return _named_trial(table, results, settings.baseline, settings)
    engines = _ordered([r.engine for r in table.first.values()], settings.engine_order)
    return next((t for e in engines if (t := default_trial(table, e, settings))), None)


# --------------------------------------------------------------------------------------
# strategies


def _best(cells: list[Cell]) -> Cell | None:
    eligible = [c for c in cells if c.eligible]
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
    from farm.records import canonical_flag, flag_set

    before = flag_set(base.flags) if base else flag_set(settings.required_flags.get(step.engine, []))
    return [f for f in step.flags if canonical_flag(f) not in before]


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


# --------------------------------------------------------------------------------------
# comparison tables


def _missing_reason(cell: Cell | None) -> str:
    if cell is None:
        return "not measured on this profile"
    return f"no successful run ({cell.reason})"


def compare(table: Table, results: Results, baseline: str, recommended: str) -> tuple[list[ComparisonRow], list[Unmeasured]]:
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
            ))
            continue
        if not b_ok:
            missing.append(Unmeasured(profile=profile, role="baseline", trial=table.first[baseline].label, reason=_missing_reason(b)))
        if not r_ok:
            missing.append(Unmeasured(profile=profile, role="recommended", trial=table.first[recommended].label,
                                      reason=_missing_reason(r)))
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
                              total_tps=cell.score, tpot_mean_ms=cell.mean("tpot_mean_ms"), eligible=cell.eligible))
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
                            tpot_lower_ms=tpot_ms, tpot_lower_pct=tpot_pct)


def _trial_rows(table: Table) -> list[TrialRow]:
    rows = []
    for (trial, profile), cell in table.cells.items():
        rec = table.first[trial]
        rows.append(TrialRow(
            id=trial, name=rec.name, engine=rec.engine, model=rec.model, flags=list(rec.flags), profile=profile,
            runs=[r.id for r in cell.records], repeats=len(cell.runs_ok), total_tps=cell.mean("total_tps"),
            tps_from_totals=cell.mean("tps_from_totals"), tpot_mean_ms=cell.mean("tpot_mean_ms"),
            success_rate=cell.success_rate, eligible=cell.eligible, reason=cell.reason,
        ))
    return rows


# --------------------------------------------------------------------------------------
# entry point


def select(results: Results, settings: SelectionSettings, strategy: str = "best", metric: str = "total_tps") -> Selection:
    """Recommend a trial from `results`; `UserError` when nothing on the primary profile may be chosen."""
    if strategy not in STRATEGIES:
        raise UserError(f"unknown strategy '{strategy}' (known: {', '.join(STRATEGIES)})", key="--strategy")
    primary = settings.primary_profile
    table = build_table(results, metric, settings.min_success_rate)
    on_primary = table.on(primary)
    if not on_primary:
        raise UserError(f"no runs on the primary profile '{primary}'", file=results.source, key="primary_profile")
    best = _best(on_primary)
    if best is None:
        raise UserError(f"no eligible trial on the primary profile '{primary}': every run failed or fell below the "
                        f"minimum success rate {pct_text(settings.min_success_rate)}", file=results.source, key="runs")
    baseline = find_baseline(table, results, settings)
    steps, step_choice = stepwise(table, results, settings, baseline)
    if strategy == "stepwise":
        if step_choice is None:
            why = ("none of its steps was kept" if steps else "none of its steps was measured") if settings.steps \
                else "the study has no ordered grid of steps"
            raise UserError(f"cannot replay stepwise: {why}", file=results.source, key="--strategy")
        recommended = step_choice
    else:
        recommended = best.trial
    comparison, unmeasured = compare(table, results, baseline, recommended) if baseline else ([], [])
    comparison_profile = settings.engine_comparison_profile or primary
    engines, lead = engine_comparison(table, settings, comparison_profile)
    return Selection(
        strategy=strategy, metric=metric, primary_profile=primary, engine_comparison_profile=comparison_profile,
        min_success_rate=settings.min_success_rate,
        recommended=_chosen(table, recommended, settings),
        baseline=_chosen(table, baseline, settings) if baseline else None,
        best_trial=best.trial, stepwise_trial=step_choice, step_grid=settings.step_grid if steps else None,
        trials=_trial_rows(table), comparison=comparison, unmeasured=unmeasured,
        engines=engines, engine_lead=lead, steps=steps,
    )
