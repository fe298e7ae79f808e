"""Selection: which serve command to recommend, computed from run records alone.

The objective is the throughput metric (by default `total_tps` as the records carry it) on the
primary profile, among eligible trials: every run ok and at least `min_success_rate` of the
requests its profile asked for succeeded. Two strategies:

- `best`: the global best of what was measured;
- `stepwise`: the seed's method replayed along the ordered steps of a grid: engines on defaults,
  then each optimization on top of the step it names in `after`, kept only if it beats that step.

With repeats, every difference is judged with farm.stats: per trial and profile the mean and a
confidence interval of throughput, TTFT and TPOT; on each profile the leader against the
runner-up and the baseline (relative difference with its interval, Holm over the comparisons).
`best` recommends a winner only when its lead is significant; otherwise it is a tie and the
simplest configuration tied with the leader (fewest non-default flags) is recommended. Single
runs cannot be tested: the leader by mean is recommended, flagged as unconfirmed.

A profile may set SLOs (`slo:` in the study): a trial that breaks one is not eligible there, and
the reason names the limit and the measured value.

Nothing here remembers a best-so-far between calls: the same records always give the same answer.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from farm.analysis import stats as fstats
from farm.errors import UserError
from farm.analysis.plan import FAMILY_ALPHA, alpha_for, control_of, is_auto
from farm.analysis.records import ConfigKey, Results, RunRecord, config_key
from farm.study.spec import EngineSpec, SLOSpec

if TYPE_CHECKING:
    from farm.study.spec import Study

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


# Metrics summarized per trial and profile (mean and confidence interval over the repeats).
STAT_METRICS = ("total_tps", "output_tps", "ttft_mean_ms", "tpot_mean_ms")
STAT_LABELS = {"total_tps": "total tok/s", "output_tps": "output tok/s", "ttft_mean_ms": "mean TTFT (ms)",
               "tpot_mean_ms": "mean TPOT (ms)"}
# Without repeats there is no measured noise; differences smaller than this between single runs
# are reported as ones the data cannot separate. An assumption, said wherever it is used.
SINGLE_RUN_NOISE = 0.05


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
    slo: dict[str, SLOSpec] = Field(default_factory=dict, description="Profile -> its SLOs (eligibility limits).")
    alpha: float = Field(default=FAMILY_ALPHA, gt=0, lt=1, description="Significance level of every verdict.")
    sequential: bool = Field(
        default=False, description="The runs come from `--repeats auto` (optional stopping): alpha is per look."
    )


def _step_grid(study: "Study", grid: str | None) -> str | None:
    if grid and study.grids.get(grid) and study.grids[grid].ordered:
        return grid
    # The seed's replay lives in the grid named `seed`; any other ordered grid is a stepwise study too.
    if "seed" in study.grids and study.grids["seed"].ordered:
        return "seed"
    return next((name for name, g in study.grids.items() if g.ordered), None)


def _steps(study: "Study", grid: str | None) -> list[StepDef]:
    from farm.engines import render_flags
    from farm.study.grid import expand

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
        slo={name: p.slo for name, p in study.profiles.items() if p.slo is not None},
        alpha=alpha_for(study.repeats),
        sequential=is_auto(study.repeats),
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


class MetricStats(_Strict):
    """Mean and confidence interval of one metric over a trial's successful runs on one profile."""

    n: int = Field(description="Runs with this metric.")
    mean: float
    std: float | None = Field(default=None, description="Sample standard deviation; none for one run.")
    ci_low: float | None = Field(default=None, description="Lower end of the Student-t interval of the mean; none for one run.")
    ci_high: float | None = Field(default=None, description="Upper end; none for one run.")
    confidence: float = Field(description="Confidence level of the interval.")


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
    stats: dict[str, MetricStats] = Field(
        default_factory=dict, description="total_tps, output_tps, ttft_mean_ms, tpot_mean_ms: mean and interval over its runs."
    )
    nodes: list[str] = Field(default_factory=list, description="Nodes its runs ran on.")
    node_control_of: str | None = Field(
        default=None, description="Set for a node control: the trial it repeats on one node (never ranked)."
    )
    slo_broken: list[str] = Field(default_factory=list, description="The SLOs of its profile it breaks.")


class DiffStat(_Strict):
    """Relative difference of two trials' means (a against b), with its interval and test."""

    a: str = Field(description="Trial id of a.")
    b: str = Field(description="Trial id of b.")
    relative_pct: float | None = Field(description="(mean a / mean b - 1) x 100.")
    ci_low_pct: float | None = Field(description="Lower end of its interval (Welch/Fieller), in %; none when untestable.")
    ci_high_pct: float | None = Field(description="Upper end, in %.")
    p_value: float | None = Field(description="Welch's two-sided p-value; none when untestable (a single run).")
    p_holm: float | None = Field(default=None, description="Holm-adjusted over the family of comparisons it belongs to.")
    significant: bool | None = Field(default=None, description="p_holm < alpha; none when untestable.")
    n_a: int
    n_b: int
    note: str = ""
    roles: list[str] = Field(default_factory=list, description="Why the comparison was made (runner_up, baseline).")


class ComparisonRow(_Strict):
    """Baseline vs recommendation on one profile where both were measured."""

    profile: str
    baseline_total_tps: float
    recommended_total_tps: float
    delta_pct: float
    baseline_tpot_mean_ms: float | None
    recommended_tpot_mean_ms: float | None
    note: str | None = Field(default=None, description="Set when a side is below the success-rate gate.")
    delta: DiffStat | None = Field(
        default=None, description="Recommended vs baseline with its interval; Holm over the profiles compared."
    )


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
    significance: Literal["significant", "not_significant", "cannot_tell"] | None = Field(
        default=None, description="Whether its difference from the step before is real (Holm over the steps judged); "
        "cannot_tell with single runs; none when the step was not judged."
    )
    delta: DiffStat | None = Field(default=None, description="This step against the step it builds on.")


class ProfileVerdict(_Strict):
    """Winner, tie or cannot-tell on one profile: the leader against the runner-up and the baseline."""

    profile: str
    decision: Literal["winner", "tie", "cannot_tell", "only_candidate"]
    recommended: str = Field(description="Trial id recommended on this profile (the winner, or the simplest tied trial).")
    winner: str | None = Field(description="The significant winner; none unless decision is 'winner'.")
    leader: str = Field(description="Best mean.")
    runner_up: str | None
    baseline: str | None = Field(description="The baseline, when it is eligible on this profile.")
    alpha: float
    tied: list[str] = Field(description="Trials not significantly below the leader (leader included).")
    comparisons: list[DiffStat] = Field(description="Leader vs runner-up and vs baseline, Holm-adjusted together.")
    complexity: dict[str, int] = Field(default_factory=dict, description="Non-default flags of each candidate.")
    candidates: int = Field(description="Eligible trials ranked.")
    reason: str


class CrossProfileCost(_Strict):
    """What the one command for all workloads gives up on one profile against that profile's own winner."""

    profile: str
    winner: str = Field(description="This profile's recommended trial.")
    total_tps: float = Field(description="The one command's mean on this profile.")
    winner_total_tps: float
    vs_baseline_pct: float = Field(description="The one command against the baseline, %.")
    cost: DiffStat = Field(description="The one command against this profile's winner (<= 0 is a cost).")


class CrossProfileRow(_Strict):
    trial: str
    worst_case_pct: float | None = Field(description="Lowest gain over the baseline across the profiles, %.")
    worst_profile: str | None
    geomean_pct: float | None = Field(description="Geometric mean of (trial / baseline) over the profiles, minus 1, in %.")
    comparable: bool = Field(description="False when it is not eligible (or not measured) on some profile.")
    missing_profiles: list[str] = Field(default_factory=list)


class CrossProfile(_Strict):
    """One command across workloads: the best worst-case gain over the baseline on every profile."""

    profiles: list[str] = Field(description="Profiles it is judged over (those with an eligible baseline).")
    profiles_left_out: list[str] = Field(default_factory=list, description="Profiles without an eligible baseline.")
    baseline: str
    recommended: str | None = Field(description="Trial id with the best worst case; none if no trial is eligible everywhere.")
    command: str | None = None
    worst_case_pct: float | None = None
    worst_profile: str | None = None
    geomean_pct: float | None = None
    costs: list[CrossProfileCost] = Field(default_factory=list)
    ranking: list[CrossProfileRow] = Field(default_factory=list)


class NodeRow(_Strict):
    node: str
    runs: int
    total_tps: MetricStats
    vs_others: DiffStat | None = Field(default=None, description="This node's runs against every other node's (Holm over nodes).")


class NodeCheck(_Strict):
    """The baseline configuration on every node it ran on: are the nodes alike?"""

    profile: str
    trial: str = Field(description="The baseline trial.")
    nodes: list[NodeRow]
    effect: bool = Field(description="Some node differs significantly from the others.")


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
    alpha: float = Field(default=FAMILY_ALPHA, description="Significance level of the verdicts.")
    sequential: bool = Field(default=False, description="Runs from `--repeats auto`: alpha is per look.")
    verdicts: list[ProfileVerdict] = Field(default_factory=list, description="Winner or tie on each profile.")
    cross_profile: CrossProfile | None = None
    nodes: NodeCheck | None = None
    pareto: dict[str, list[str]] = Field(
        default_factory=dict, description="Profile -> trial ids on the throughput / mean-TPOT Pareto front.")
    edges: list[fstats.EdgeWarning] = Field(default_factory=list, description="Numeric flags whose best value is at the edge.")
    unseparated: list[str] = Field(
        default_factory=list, description="Single runs: trials within the assumed noise of the recommendation.")

    def verdict(self, profile: str | None = None) -> ProfileVerdict | None:
        profile = profile or self.primary_profile
        return next((v for v in self.verdicts if v.profile == profile), None)


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
        return control_of(self.trial)


def _slo_breaks(cell: Cell, slo: SLOSpec) -> list[str]:
    """The latency SLOs the mean over its runs breaks, each with the measured value and the limit."""
    out = []
    n = len(cell.runs_ok)
    over = f" (mean of {n} runs)" if n > 1 else ""
    for metric, limit, label in (("ttft_p95_ms", slo.ttft_p95_ms_max, "P95 TTFT"),
                                 ("tpot_mean_ms", slo.tpot_mean_ms_max, "mean TPOT")):
        if limit is None:
            continue
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
    from farm.engines import ENGINES

    rec = next((r for r in records if r.dummy_weights), None)
    engine = ENGINES.get(rec.engine) if rec is not None else None
    return engine.output_dependent(rec.flags) if engine is not None else []


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


def build_table(results: Results, metric: str, min_success_rate: float,
                slo: dict[str, SLOSpec] | None = None) -> Table:
    cells: dict[tuple[str, str], Cell] = {}
    first: dict[str, RunRecord] = {}
    for rec in results.records:
        first.setdefault(rec.trial, rec)
        cells.setdefault((rec.trial, rec.profile), Cell(rec.trial, rec.profile, [])).records.append(rec)
    for cell in cells.values():
        _judge(cell, metric, min_success_rate, (slo or {}).get(cell.profile))
    by_key = {}
    # A node control repeats another trial's configuration: the key names the trial itself.
    for trial, rec in sorted(first.items(), key=lambda kv: control_of(kv[0]) is not None):
        by_key.setdefault(rec.key, trial)
    return Table(cells, first, by_key)


# --------------------------------------------------------------------------------------
# commands and trial facts


def serve_command(rec: RunRecord, settings: SelectionSettings) -> str:
    """The command to serve `rec`'s configuration, through its engine adapter when farm has one."""
    if rec.command:
        return rec.command
    from farm.engines import ENGINES, parse_cli_flags
    from farm.study.trial import Trial

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
    from farm.analysis.records import canonical_flag, flag_set

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


def compare(table: Table, results: Results, baseline: str, recommended: str,
            alpha: float = FAMILY_ALPHA, metric: str = "total_tps") -> tuple[list[ComparisonRow], list[Unmeasured]]:
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
                delta=diff_stat(recommended, baseline, r.values(metric), b.values(metric), alpha)
                if recommended != baseline else None,
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
            id=trial, name=rec.name, engine=rec.engine, model=rec.model, flags=list(rec.flags), profile=profile,
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


def diff_stat(a: str, b: str, a_values: list[float], b_values: list[float], alpha: float = FAMILY_ALPHA) -> DiffStat:
    """a against b, unadjusted (p_holm = p until `holm_fill` adjusts a family)."""
    d = fstats.relative_difference(a_values, b_values, confidence=1 - alpha)
    return DiffStat(a=a, b=b, relative_pct=_pct_or_none(d.relative), ci_low_pct=_pct_or_none(d.ci_low),
                    ci_high_pct=_pct_or_none(d.ci_high), p_value=d.p_value, p_holm=d.p_value,
                    significant=None if d.p_value is None else d.p_value < alpha, n_a=d.n_a, n_b=d.n_b, note=d.note)


def holm_fill(diffs: list[DiffStat], alpha: float) -> None:
    """Holm-adjust a family of comparisons in place (the untestable ones stay untested)."""
    testable = [d for d in diffs if d.p_value is not None]
    for d, p in zip(testable, fstats.holm([d.p_value for d in testable])):
        d.p_holm = p
        d.significant = p < alpha


def complexity_of(rec: RunRecord, settings: SelectionSettings, baseline_model: str | None = None) -> int:
    """Non-default choices of a configuration: flags beyond its engine's required ones, plus one for
    serving another model than the baseline's (e.g. a quantized variant)."""
    from farm.analysis.records import canonical_flag, flag_set

    required = flag_set(settings.required_flags.get(rec.engine, []))
    n = sum(1 for f in rec.flags if canonical_flag(f) not in required)
    return n + (1 if baseline_model is not None and rec.model != baseline_model else 0)


def _keys(table: Table, trials: list[str]) -> dict[str, str]:
    """Trial id -> the name it goes by in verdict texts (its label, when labels are unique)."""
    labels = {t: table.first[t].label for t in trials}
    return labels if len(set(labels.values())) == len(labels) else {t: t for t in trials}


def candidates_on(table: Table, profile: str, metric: str) -> list[Cell]:
    """Eligible, ranked cells of a profile: node controls are never candidates."""
    return [c for c in table.on(profile) if c.eligible and c.control_of is None and c.values(metric)]


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
                              alpha=settings.alpha, complexity={key[t]: n for t, n in complexity.items()})
    comparisons = []
    for c in v.comparisons:
        d = c.diff
        comparisons.append(DiffStat(a=back[c.a], b=back[c.b], relative_pct=_pct_or_none(d.relative),
                                    ci_low_pct=_pct_or_none(d.ci_low), ci_high_pct=_pct_or_none(d.ci_high),
                                    p_value=d.p_value, p_holm=c.p_adjusted, significant=c.significant,
                                    n_a=d.n_a, n_b=d.n_b, note=d.note, roles=list(c.roles)))
    return ProfileVerdict(
        profile=profile, decision=v.decision, recommended=back[v.recommended],
        winner=back[v.winner] if v.winner else None, leader=back[v.leader],
        runner_up=back[v.runner_up] if v.runner_up else None, baseline=base_ok, alpha=settings.alpha,
        tied=[back[k] for k in v.tied], comparisons=comparisons, complexity=complexity, candidates=len(cells),
        reason=v.reason,
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
            cost=diff_stat(pick.trial, winner, table.get(pick.trial, pc.profile).values(metric),
                           table.get(winner, pc.profile).values(metric), settings.alpha)))
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
             if rec.key == key and (t == baseline or control_of(t) == baseline)]
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
                            vs_others=diff_stat(node, "other nodes", values, others, settings.alpha)))
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
        for flag in rec.flags:
            name, sep, value = flag.lstrip("-").partition("=")
            number = _number(value) if sep else None
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
    """Each kept or rejected step against the step it was judged against; Holm over the steps."""
    by_step = {r.step: r for r in rows}
    roots = [r for r in rows if r.after is None and r.verdict == "kept"]
    judged = []
    for row in rows:
        if row.verdict not in ("kept", "rejected") or row.trial is None:
            continue
        other = by_step.get(row.after) if row.after else (roots[0] if roots and roots[0] is not row else None)
        if other is None or other.trial is None:
            continue
        a, b = table.get(row.trial, settings.primary_profile), table.get(other.trial, settings.primary_profile)
        if a is None or b is None:
            continue
        row.delta = diff_stat(row.trial, other.trial, a.values(metric), b.values(metric), settings.alpha)
        judged.append(row)
    holm_fill([r.delta for r in judged], settings.alpha)
    for row in judged:
        d = row.delta
        row.significance = "cannot_tell" if d.significant is None else ("significant" if d.significant else "not_significant")


# --------------------------------------------------------------------------------------
# entry point


def select(results: Results, settings: SelectionSettings, strategy: str = "best", metric: str = "total_tps") -> Selection:
    """Recommend a trial from `results`; `UserError` when nothing on the primary profile may be chosen."""
    if strategy not in STRATEGIES:
        raise UserError(f"unknown strategy '{strategy}' (known: {', '.join(STRATEGIES)})", key="--strategy")
    primary = settings.primary_profile
    table = build_table(results, metric, settings.min_success_rate, settings.slo)
    on_primary = table.on(primary)
    if not on_primary:
        raise UserError(f"no runs on the primary profile '{primary}'", file=results.source, key="primary_profile")
    best = _best(on_primary)
    if best is None:
        raise UserError(f"no eligible trial on the primary profile '{primary}': every run failed or fell below the "
                        f"minimum success rate {pct_text(settings.min_success_rate)}", file=results.source, key="runs")
    baseline = find_baseline(table, results, settings)
    steps, step_choice = stepwise(table, results, settings, baseline)
    _step_significance(steps, table, settings, metric)
    verdicts = [v for p in results.profiles_with_runs() if (v := profile_verdict(table, p, settings, baseline, metric))]
    primary_verdict = next((v for v in verdicts if v.profile == primary), None)
    if strategy == "stepwise":
        if step_choice is None:
            why = ("none of its steps was kept" if steps else "none of its steps was measured") if settings.steps \
                else "the study has no ordered grid of steps"
            raise UserError(f"cannot replay stepwise: {why}", file=results.source, key="--strategy")
        recommended = step_choice
    else:
        # A winner only when its lead is significant; on a tie the simplest tied configuration.
        recommended = primary_verdict.recommended if primary_verdict else best.trial
    comparison, unmeasured = compare(table, results, baseline, recommended, settings.alpha, metric) if baseline else ([], [])
    comparison_profile = settings.engine_comparison_profile or primary
    engines, lead = engine_comparison(table, settings, comparison_profile)
    return Selection(
        strategy=strategy, metric=metric, primary_profile=primary, engine_comparison_profile=comparison_profile,
        min_success_rate=settings.min_success_rate,
        recommended=_chosen(table, recommended, settings),
        baseline=_chosen(table, baseline, settings) if baseline else None,
        best_trial=best.trial, stepwise_trial=step_choice, step_grid=settings.step_grid if steps else None,
        trials=_trial_rows(table, 1 - settings.alpha), comparison=comparison, unmeasured=unmeasured,
        engines=engines, engine_lead=lead, steps=steps,
        alpha=settings.alpha, sequential=settings.sequential, verdicts=verdicts,
        cross_profile=cross_profile(table, results, settings, baseline, verdicts, metric),
        nodes=node_check(table, settings, baseline, metric), pareto=pareto(table, metric),
        edges=edges(table, settings, metric), unseparated=unseparated(table, settings, recommended, primary_verdict, metric),
    )
