"""The table of (trial, profile) cells and the rules that judge a cell (eligibility, SLOs), the
serve command of a trial, default and baseline trials."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from farm.analysis.quality_verdicts import refusal
from farm.analysis.records import ConfigKey, Results, RunRecord, config_key
from farm.analysis.selection.models import METRIC_LABELS, ChosenTrial, SelectionSettings
from farm.engines import ENGINES
from farm.errors import UserError
from farm.study.spec import EngineSpec, SLOSpec

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
    slo_broken: list[str] = field(default_factory=list)

    def values(self, metric: str) -> list[float]:
        return [v for r in self.runs_ok if (v := r.metric(metric)) is not None]

    def mean(self, metric: str) -> float | None:
        return _mean(self.values(metric))

    @property
    def control_of(self) -> str | None:
        """The trial this cell's node control repeats; None for an ordinary trial."""
        return self.records[0].node_control_of if self.records else None


def _slo_breaks(cell: Cell, slo: SLOSpec) -> list[str]:
    """The latency SLOs the mean over its runs breaks, each with the measured value and the limit."""
    out = []
    n = len(cell.runs_ok)
    over = f" (mean of {n} runs)" if n > 1 else ""
    for metric, limit, label in slo.latency_limits():
        value = cell.mean(metric)
        if value is None:
            out.append(f"{label} not measured, limit {limit:g} ms")
        elif value > limit:
            out.append(f"{label} {value:.2f} ms{over} > {limit:g} ms")
    return out


def _judge(cell: Cell, metric: str, min_rate: float, slo: SLOSpec | None = None) -> None:
    failed = [r for r in cell.records if not r.measured]
    cell.runs_ok = [r for r in cell.records if r.measured]
    rates = [r.success_rate for r in cell.records if r.success_rate is not None]
    cell.success_rate = min(rates) if rates else None
    cell.score = cell.mean(metric)
    slo_rate = slo is not None and slo.min_success_rate is not None
    if slo_rate:
        min_rate = slo.min_success_rate
    cell.slo_broken = _slo_breaks(cell, slo) if slo is not None and cell.runs_ok else []
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
        cell.reason = f"{'SLO: ' if slo_rate else ''}{lowest} {pct_text(cell.success_rate)} < {pct_text(min_rate)}{counts}"
        if slo_rate:
            cell.slo_broken.insert(0, cell.reason.removeprefix("SLO: "))
    elif cell.slo_broken:
        cell.reason = "SLO: " + "; ".join(cell.slo_broken)
    elif cell.score is None:
        cell.reason = f"no {METRIC_LABELS.get(metric, metric)} in its runs"
    elif (dependent := _output_dependent_on_dummy(cell.records)):
        cell.reason = (f"measured on dummy weights with {', '.join('--' + f for f in dependent)}: its throughput "
                       f"depends on what the model outputs (accepted draft tokens), which random weights do not "
                       f"show; measure it with the real checkpoint")
    else:
        cell.eligible = True


def _output_dependent_on_dummy(records: list[RunRecord]) -> list[str]:
    """Flags of a dummy-weights trial whose effect depends on the model's output (speculative decoding)."""
    rec = next((r for r in records if r.dummy_weights), None)
    engine = ENGINES.get(rec.engine) if rec is not None else None
    return engine.output_dependent(rec.flags) if engine is not None else []


@dataclass
class Table:
    """Every (trial, profile) cell plus the facts about each trial, in the records' order."""

    cells: dict[tuple[str, str], Cell]
    first: dict[str, RunRecord]  # trial -> its first record (engine, model, flags, name)
    by_key: dict[ConfigKey, str]
    # The baseline once selection found it: the first control across machines (farm/analysis/selection/machines.py).
    baseline: str | None = None

    def get(self, trial: str | None, profile: str) -> Cell | None:
        return self.cells.get((trial, profile)) if trial else None

    def on(self, profile: str) -> list[Cell]:
        return [c for (t, p), c in self.cells.items() if p == profile]


def build_table(results: Results, metric: str, min_success_rate: float,
                slo: dict[str, SLOSpec] | None = None) -> Table:
    cells: dict[tuple[str, str], Cell] = {}
    first: dict[str, RunRecord] = {}
    for rec in results.records:
        first.setdefault(rec.trial, rec)
        cells.setdefault((rec.trial, rec.profile), Cell(rec.trial, rec.profile, [])).records.append(rec)
    for cell in cells.values():
        _judge(cell, metric, min_success_rate, (slo or {}).get(cell.profile))
        # The quality gate: a trial significantly worse than its reference is never recommended.
        if cell.eligible and (refused := refusal(results.quality.get(cell.trial))):
            cell.eligible, cell.reason = False, refused
    by_key = {}
    # A node control repeats another trial's configuration: the key names the trial itself.
    for trial, rec in sorted(first.items(), key=lambda kv: kv[1].node_control_of is not None):
        by_key.setdefault(rec.key, trial)
    return Table(cells, first, by_key)


# --------------------------------------------------------------------------------------
# commands and trial facts


def serve_command(rec: RunRecord, settings: SelectionSettings) -> str:
    """The command to serve `rec`'s configuration, through its engine adapter when farm has one."""
    if rec.command:
        return rec.command
    engine = ENGINES.get(rec.engine)
    if engine is None:  # a results file may name an engine farm has no adapter for
        return shlex.join([rec.engine, rec.model, *rec.cli_flags])
    return engine.serve_command_of(settings.engines.get(rec.engine) or EngineSpec(), rec.model, rec.flags)


def _chosen(table: Table, trial: str, settings: SelectionSettings) -> ChosenTrial:
    rec = table.first[trial]
    cell = table.get(trial, settings.primary_profile)
    return ChosenTrial(command=serve_command(rec, settings), trial=trial, name=rec.name, engine=rec.engine,
                       model=rec.model, flags=rec.cli_flags, total_tps=cell.score if cell else None)


def _ordered(values: list[str], preferred: list[str]) -> list[str]:
    return [v for v in preferred if v in values] + [v for v in dict.fromkeys(values) if v not in preferred]


def default_trial(table: Table, engine: str, settings: SelectionSettings) -> str | None:
    """The engine-default trial: only the engine's required flags, on the study's first model measured."""
    models = _ordered([r.model for r in table.first.values() if r.engine == engine], settings.model_order)
    for model in models:
        trial = table.by_key.get(config_key(engine, model, settings.required_flags.get(engine, {})))
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
