"""Selection's models: its settings (`settings_for`), and the output models (the JSON object of
`farm analyze --format json`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator

from farm.analysis import stats as fstats
from farm.analysis.limits import EffectiveLimits
from farm.analysis.records import Results
from farm.analysis.selection.capacity_models import CapacityRanking
from farm.engines import parse_cli_flags
from farm.errors import UserError
from farm.strict import Strict
from farm.study.grid import expand
from farm.study.repeats import AUTO_FIRST_PASS, FAMILY_ALPHA, alpha_for, auto_design, is_auto
from farm.study.spec import EngineSpec, SLOSpec, Study



Strategy = Literal["best", "stepwise"]
STRATEGIES: tuple[str, ...] = ("best", "stepwise")

# Throughput metrics a selection can rank by. `total_tps` is whatever the source recorded under
# that name (the seed: its client's windowed figure; farm: tokens / duration).
METRIC_LABELS = {
    "total_tps": "total_tps as recorded",
    "tps_from_totals": "(input + output tokens) / duration",
    "guidellm_total_tps_mean": "guidellm's windowed mean token rate",
    "steady_tps": "total tok/s while the client held its full concurrency (farm/analysis/steady.py)",
}


# Metrics summarized per trial and profile (mean and confidence interval over the repeats).
STAT_METRICS = ("total_tps", "output_tps", "ttft_mean_ms", "tpot_mean_ms")
STAT_LABELS = {"total_tps": "total tok/s", "output_tps": "output tok/s", "ttft_mean_ms": "mean TTFT (ms)",
               "tpot_mean_ms": "mean TPOT (ms)"}
# Without repeats there is no measured noise; differences smaller than this between single runs
# are reported as ones the data cannot separate. An assumption, said wherever it is used.
SINGLE_RUN_NOISE = 0.05


# --------------------------------------------------------------------------------------
# settings


class StepDef(Strict):
    """One named step of an ordered grid: the configuration it measures and the step it builds on."""

    name: str = Field(description="Step name (the grid block's `name`).")
    engine: str = Field(description="Engine of the step.")
    model: str = Field(description="Model the step serves.")
    flags: dict[str, Any] = Field(description="Every flag of the step by name, required ones included.")
    after: str | None = Field(default=None, description="Step it builds on; none for the engine-default steps.")


class SelectionSettings(Strict):
    """What selection needs from a study, so that selection itself needs no study file."""

    primary_profile: str = Field(description="Profile whose throughput is the objective.")
    engine_comparison_profile: str | None = Field(default=None, description="Profile of the engine comparison; default the primary.")
    min_success_rate: float = Field(default=0.99, ge=0, le=1, description="Eligibility: successful / asked requests.")
    baseline: str | None = Field(default=None, description="Trial id, trial name or run id of the baseline; default engine-default.")
    baseline_from: str = Field(default="baseline", description="Where `baseline` was given (a CLI option or a study key), for errors.")
    required_flags: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Engine -> flags every trial of it gets, by name (CLI strings are read too).")
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
    equivalence_margin: float = Field(
        default=fstats.DEFAULT_MARGIN, gt=0, lt=1,
        description="Two trials within [1/(1+m), 1+m] of each other (the ratio's (1 - 2 alpha) interval) are the same.")

    @field_validator("required_flags", mode="before")
    @classmethod
    def _cli_strings(cls, value: Any) -> Any:
        # Settings written by hand (tests, a caller with a results file) may list `--name=value` strings.
        if isinstance(value, dict):
            return {k: parse_cli_flags(v) if isinstance(v, list) else v for k, v in value.items()}
        return value


def _step_grid(study: "Study", grid: str | None) -> str | None:
    if grid and study.grids.get(grid) and study.grids[grid].ordered:
        return grid
    # The seed's replay lives in the grid named `seed`; any other ordered grid is a stepwise study too.
    if "seed" in study.grids and study.grids["seed"].ordered:
        return "seed"
    return next((name for name, g in study.grids.items() if g.ordered), None)


def _steps(study: "Study", grid: str | None) -> list[StepDef]:
    if grid is None:
        return []
    # The steps are the step grid's trials; a sweep of another grid, or a results file (which
    # records no `after`), does not carry them, so the study's step grid is expanded here.
    return [StepDef(name=t.label, engine=t.engine, model=t.model, flags=t.all_flags, after=t.after)
            for t in expand(study, grid)]


def auto_look(results: Results, primary: str, max_runs: int | None,
              first_pass: int = AUTO_FIRST_PASS) -> tuple[int, int]:
    """(look, looks) of `--repeats auto` runs (farm/study/repeats.py `auto_design`, whose level their
    verdicts take): the runs each ranked trial has on the primary profile, and all the runs, the
    first pass having given `first_pass` runs each (`first_pass_runs`). The pass plan
    (farm/analysis/plan.py) asks the same."""
    counts: dict[str, int] = {}
    for r in results.records:
        if r.profile == primary and r.node_control_of is None:
            counts[r.trial] = counts.get(r.trial, 0) + 1
    return auto_design(counts.values(), len(results.records), max_runs, first_pass=first_pass)


def first_pass_runs(study: "Study", grid: str | None, primary: str) -> int:
    """The primary profile's runs each in a `--repeats auto` sweep's first pass: `AUTO_FIRST_PASS`,
    or more where a block's `profile_repeats` asks more (the actor runs the larger, actors/bench.py;
    the most over the grid's blocks, or every grid's where none is named: the later the looks are
    counted from, the stricter their levels)."""
    grids = [study.grids[grid]] if grid and grid in study.grids else list(study.grids.values())
    return max((max(AUTO_FIRST_PASS, b.profile_repeats.get(primary, 0)) for g in grids for b in g.blocks),
               default=AUTO_FIRST_PASS)


def settings_for(results: Results, study: "Study", *, baseline: str | None = None, grid: str | None = None,
                 prefer_results_profile: bool = False) -> SelectionSettings:
    """Selection settings from a study, checked against the results they will judge.

    The primary profile is the study's (or `grid`'s), unless `prefer_results_profile` and the
    results name their own (a sweep's results file analysed without `--config`).
    """
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
    first = first_pass_runs(study, grid, primary)  # the looks of --repeats auto count from it
    return SelectionSettings(
        primary_profile=primary,
        engine_comparison_profile=comparison,
        min_success_rate=study.min_success_rate,
        baseline=baseline or study.baseline,
        baseline_from="--baseline" if baseline else f"baseline (in {study.source or 'the study'})",
        required_flags={name: dict(spec.flags) for name, spec in study.engines.items()},
        engine_order=list(study.engines),
        model_order=[m.name for m in study.models.values()],
        steps=_steps(study, step_grid),
        step_grid=step_grid,
        engines=dict(study.engines),
        slo={name: p.slo for name, p in study.profiles.items() if p.slo is not None},
        alpha=alpha_for(study.repeats, *auto_look(results, primary, study.max_runs, first), first_pass=first),
        sequential=is_auto(study.repeats),
        equivalence_margin=study.equivalence_margin,
    )


# --------------------------------------------------------------------------------------
# output models (the JSON object of `farm analyze --format json`)


class ChosenTrial(Strict):
    """A trial picked by selection (the recommendation or the baseline) and how to serve it."""

    command: str = Field(description="What a user pastes to serve this configuration.")
    trial: str = Field(description="Trial id.")
    name: str | None = Field(default=None, description="Trial name (seed step), if any.")
    engine: str
    model: str
    flags: list[str] = Field(description="Every flag as CLI strings.")
    total_tps: float | None = Field(default=None, description="Its value of the selection metric on the primary profile.")


class MetricStats(Strict):
    """Mean and confidence interval of one metric over a trial's successful runs on one profile."""

    n: int = Field(description="Runs with this metric.")
    mean: float
    std: float | None = Field(default=None, description="Sample standard deviation; none for one run.")
    ci_low: float | None = Field(default=None, description="Lower end of the Student-t interval of the mean; none for one run.")
    ci_high: float | None = Field(default=None, description="Upper end; none for one run.")
    confidence: float = Field(description="Confidence level of the interval.")


class TrialRow(Strict):
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


class DiffStat(Strict):
    """Two trials (a against b) on the ratio scale: the relative difference, its interval, its test
    and its decision (better, worse, equivalent within the margin, undecided)."""

    a: str = Field(description="Trial id of a.")
    b: str = Field(description="Trial id of b.")
    relative_pct: float | None = Field(description="(ratio of a's to b's geometric mean - 1) x 100.")
    ci_low_pct: float | None = Field(description="Lower end of its (1 - alpha) interval (Welch on the logs, back-"
                                     "transformed), in %; none when untestable.")
    ci_high_pct: float | None = Field(description="Upper end, in %.")
    p_value: float | None = Field(description="Welch's two-sided p-value on the logs; none when untestable (a single run).")
    p_holm: float | None = Field(default=None, description="Holm-adjusted over the family of comparisons it belongs to.")
    significant: bool | None = Field(default=None, description="p_holm < alpha; none when untestable.")
    n_a: int
    n_b: int
    note: str = ""
    roles: list[str] = Field(default_factory=list, description="Why the comparison was made (runner_up, baseline).")
    decision: fstats.Decision | None = Field(default=None, description=(
        "better / worse: a differs from b (p_holm < alpha); equivalent: the (1 - 2 alpha) interval of the ratio lies "
        "inside [1/(1+m), 1+m]; undecided: neither. None only where no decision was asked for."))
    margin_pct: float | None = Field(default=None, description="The equivalence margin m, in %.")
    eq_low_pct: float | None = Field(default=None, description="Lower end of the (1 - 2 alpha) interval of the ratio "
                                     "(what equivalence is judged on), in %.")
    eq_high_pct: float | None = Field(default=None, description="Upper end, in %.")
    p_equivalent: float | None = Field(default=None, description="TOST p-value (the larger one-sided p).")
    runs_each: int | None = Field(default=None, description="Undecided: runs per side at which the current noise "
                                  "and difference would decide it; none when decided or when no number would.")
    more_runs: int | None = Field(default=None, description="Undecided: runs each side still needs to reach `runs_each`.")
    why: str = Field(default="", description="The decision in words.")
    machines: Literal["one_machine", "within", "via_control", "no_shared_control"] | None = Field(
        default=None, description="Where the runs compared ran: one_machine (all of both on one machine), within "
        "(only the machines both ran on), via_control (across machines, each against a control on its own machine), "
        "no_shared_control (across machines, nothing to bridge them: undecided); none where not asked.")
    machines_note: str = Field(default="", description="Which machines, runs and control the comparison used.")
    control: str | None = Field(default=None, description="via_control: the control it went through.")
    # The two-sample result behind it (not serialized): Holm's adjustment of a family re-decides from it.
    _diff: fstats.Diff | None = PrivateAttr(default=None)


class ComparisonRow(Strict):
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


class Unmeasured(Strict):
    """A profile where the baseline or the recommendation has no number: said, never filled in."""

    profile: str
    role: Literal["baseline", "recommended"]
    trial: str
    reason: str


class EngineRow(Strict):
    """One engine on defaults (required flags only) on the engine-comparison profile."""

    engine: str
    trial: str
    model: str
    total_tps: float | None
    tpot_mean_ms: float | None
    eligible: bool
    limits: EffectiveLimits | None = Field(default=None, description="The limits it ran under, from its log.")


class EngineLead(Strict):
    """How far the fastest engine on defaults is ahead of the next one."""

    profile: str
    leader: str
    runner_up: str
    total_tps_ahead: float = Field(description="Leader minus runner-up, tok/s.")
    total_tps_ahead_pct: float = Field(description="Relative to the runner-up.")
    tpot_lower_ms: float | None = Field(default=None, description="Runner-up minus leader mean TPOT.")
    tpot_lower_pct: float | None = Field(default=None, description="Relative to the runner-up's mean TPOT.")
    limits_apart: list[str] = Field(default_factory=list, description=(
        "Effective limits on which leader and runner-up clearly differ (farm/analysis/limits.py): the "
        "verdict may then say more about a default than about the engines."))


class EngineMatchup(Strict):
    """The fastest engine against the next on one profile, both at defaults or both at their best."""

    profile: str
    at: Literal["defaults", "best"]
    leader: str
    runner_up: str
    leader_trial: str
    runner_up_trial: str
    leader_tps: float
    runner_up_tps: float
    diff: "DiffStat" = Field(description="Leader against runner-up; an interval where both ran at least twice.")
    limits_apart: list[str] = Field(default_factory=list, description="Effective limits on which the two clearly differ.")


Verdict = Literal["kept", "rejected", "not_eligible", "not_measured", "skipped"]


class StepRow(Strict):
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
        "cannot_tell with single runs; none when the step was not judged. Its decision (better, worse, equivalent, "
        "undecided) is `delta.decision`."
    )
    delta: DiffStat | None = Field(default=None, description="This step against the step it builds on.")


class ProfileVerdict(Strict):
    """The decision on one profile: the leader against the runner-up and the baseline."""

    profile: str
    decision: Literal["winner", "equivalent", "undecided", "cannot_tell", "only_candidate"] = Field(description=(
        "The leader against the runner-up: winner (better), equivalent (within the margin), undecided (neither "
        "yet), cannot_tell (single runs), only_candidate."))
    recommended: str = Field(description="Trial id recommended on this profile: the simplest of the leader and the "
                             "trials proven equivalent to it.")
    winner: str | None = Field(description="The significant winner; none unless decision is 'winner'.")
    leader: str = Field(description="Best mean.")
    runner_up: str | None
    baseline: str | None = Field(description="The baseline, when it is eligible on this profile.")
    alpha: float
    margin: float = Field(default=fstats.DEFAULT_MARGIN, description="Equivalence margin (fraction).")
    equivalent: list[str] = Field(description="The leader and the trials proven equivalent to it within the margin.")
    comparisons: list[DiffStat] = Field(description="Leader vs runner-up and vs baseline, Holm-adjusted together; "
                                        "vs the recommended trial when it is a simpler equivalent one.")
    complexity: dict[str, int] = Field(default_factory=dict, description="Non-default flags of each candidate.")
    candidates: int = Field(description="Eligible trials ranked.")
    reason: str


class CrossProfileCost(Strict):
    """What the one command for all workloads gives up on one profile against that profile's own winner."""

    profile: str
    winner: str = Field(description="This profile's recommended trial.")
    total_tps: float = Field(description="The one command's mean on this profile.")
    winner_total_tps: float
    vs_baseline_pct: float = Field(description="The one command against the baseline, %.")
    cost: DiffStat = Field(description="The one command against this profile's winner (<= 0 is a cost).")


class CrossProfileRow(Strict):
    trial: str
    worst_case_pct: float | None = Field(description="Lowest gain over the baseline across the profiles, %.")
    worst_profile: str | None
    geomean_pct: float | None = Field(description="Geometric mean of (trial / baseline) over the profiles, minus 1, in %.")
    comparable: bool = Field(description="False when it is not eligible (or not measured) on some profile.")
    missing_profiles: list[str] = Field(default_factory=list)


class CrossProfile(Strict):
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


class NodeRow(Strict):
    node: str
    runs: int
    total_tps: MetricStats
    vs_others: DiffStat | None = Field(default=None, description="This node's runs against every other node's (Holm over nodes).")


class NodeCheck(Strict):
    """The baseline configuration on every node it ran on: are the nodes alike?"""

    profile: str
    trial: str = Field(description="The baseline trial.")
    nodes: list[NodeRow]
    effect: bool = Field(description="Some node differs significantly from the others.")


class ReportWarning(Strict):
    """Something in the numbers a reader must know before trusting them."""

    code: str = Field(description="rate_mismatch, tpot_inconsistent, itl_zero, single_run, local_optimum, ...")
    trial: str | None = Field(default=None, description="Trial label it concerns; none for the whole study.")
    profile: str | None = None
    message: str
    size: float | None = Field(default=None, description=(
        "How far off, so a terminal can name the worst of a code: % apart (rate_mismatch, tpot_inconsistent), "
        "none where a warning has no size."))


class Selection(Strict):
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
    engine_matchups: list[EngineMatchup] = Field(
        default_factory=list, description="Engine against engine on every profile, at defaults and at their best.")
    steps: list[StepRow]
    alpha: float = Field(default=FAMILY_ALPHA, description="Significance level of the verdicts.")
    sequential: bool = Field(default=False, description="Runs from `--repeats auto`: alpha is per look.")
    equivalence_margin: float = Field(default=fstats.DEFAULT_MARGIN, description="The study's equivalence margin "
                                      "(fraction): decisions call two trials the same within [1/(1+m), 1+m].")
    verdicts: list[ProfileVerdict] = Field(default_factory=list, description="The decision on each profile.")
    cross_profile: CrossProfile | None = None
    nodes: NodeCheck | None = None
    pareto: dict[str, list[str]] = Field(
        default_factory=dict, description="Profile -> trial ids on the throughput / mean-TPOT Pareto front.")
    edges: list[fstats.EdgeWarning] = Field(default_factory=list, description="Numeric flags whose best value is at the edge.")
    unseparated: list[str] = Field(
        default_factory=list, description="Single runs: trials within the assumed noise of the recommendation.")
    capacity: list[CapacityRanking] = Field(
        default_factory=list, description="Capacity profiles: each trial's capacity under the SLO, ranked "
        "(farm/analysis/selection/capacity.py).")

    def verdict(self, profile: str | None = None) -> ProfileVerdict | None:
        profile = profile or self.primary_profile
        return next((v for v in self.verdicts if v.profile == profile), None)
