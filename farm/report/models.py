"""The report's models (what `build_report` computes) and the thresholds of its checks."""

from __future__ import annotations

from pydantic import Field

from farm.strict import Strict

from farm.analysis.cost import Costs
from farm.analysis.gpu_time import GpuTime
from farm.analysis.halving import RungPlan
from farm.analysis.local_search import ProfileDelta, SearchPlan
from farm.analysis.memory_fit import KvCheck
from farm.analysis.records import Results
from farm.analysis.reference import ReferenceComparison
from farm.analysis.select import (
    ReportWarning,
    Selection,
)

# Thresholds of the checks (issue 3, point 6).
RATE_TOLERANCE = 0.02      # recorded vs recomputed token rate
TPOT_TOLERANCE = 0.15      # mean TPOT vs what mean latency and TTFT imply (H200 runs: within 0.01 %; the mock: 4 %)
PEAK_FACTOR = 10.0         # peak output rate vs mean output rate

WARNING_CODES = ("rate_mismatch", "tpot_inconsistent", "itl_zero", "single_run",
                 "local_optimum", "no_baseline", "knob_overridden", "moe_default_config")
# Checks of the evidence itself (issue 7): differences the data cannot separate, a recommendation
# whose gain over the baseline is not significant, nodes that differ, knobs tried only up to an edge,
# a recommendation another section shows significantly slower on its own profile (issue 45).
# A run far off the others of its engine start, or a drift over them (farm/analysis/drift.py), too.
EVIDENCE_CODES = ("cannot_separate", "not_significant", "regression", "node_effect", "edge_of_range", "contradiction",
                  "run_order", "drift")


_Strict = Strict  # farm/strict.py: the one strict base


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


class HalvingNote(_Strict):
    """A halving sweep's rungs and stops as its report shows them (farm/analysis/halving.py)."""

    sweep_id: str | None = Field(default=None, description="The sweep's id, where the report covers several.")
    plan: RungPlan = Field(description="Where the sweep stands: what each rung spent, every stop.")
    labels: dict[str, str] = Field(default_factory=dict, description="Trial id -> its label.")


class LocalSearchNote(_Strict):
    """A local search's path and its answer, the user's command against farm's pick (farm/analysis/local_search.py)."""

    sweep_id: str | None = Field(default=None, description="The sweep's id, where the report covers several.")
    plan: SearchPlan
    final: list[ProfileDelta] = Field(default_factory=list, description="Farm's pick against the start, per profile.")
    labels: dict[str, str] = Field(default_factory=dict, description="Trial id -> its label.")


class MemoryFitNote(_Strict):
    """The memory-fit predictor's error on one sweep's trials (farm/analysis/memory_fit.py)."""

    sweep_id: str | None = Field(default=None, description="The sweep's id, where the report covers several.")
    checks: list[KvCheck] = Field(description="Predicted beside reported KV-cache tokens, per trial.")
    accelerator: str | None = Field(default=None, description="The GPU model (as Ray names it) whose memory the "
                                    "predictions are for: a fit is per GPU model.")


class Report(_Strict):
    """Selection, its warnings and the rate analysis, with the results they came from."""

    title: str
    selection: Selection
    warnings: list[ReportWarning]
    rate_analysis: RateAnalysis | None
    results: Results
    slo: dict[str, str] = Field(default_factory=dict, description="Profile -> its SLOs in words.")
    success_floors: dict[str, float] = Field(default_factory=dict, description="Profile -> the success rate its SLO "
                                             "requires, where it sets its own (else the study's applies).")
    reference: ReferenceComparison | None = Field(default=None, description="farm's numbers beside the study's reference.")
    gpu_time: GpuTime | None = Field(default=None, description="Where the trials' GPU time went, by phase (none: not recorded).")
    costs: Costs | None = Field(default=None, description="Each trial's dollars and joules per million tokens, and "
                                "the sweep's GPU-hours priced (dollars only where a price was given).")
    halving: list[HalvingNote] = Field(default_factory=list,
                                       description="Each halving sweep's: what each rung spent, why each trial stopped.")
    memory_fit: list[MemoryFitNote] = Field(default_factory=list,
                                            description="Each sweep's predicted vs reported KV-cache tokens, per trial.")
    local_search: list[LocalSearchNote] = Field(default_factory=list,
                                                description="Each local search's path and its final comparison.")
    notes: list[str] = Field(default_factory=list, description="What the reader should know that is no anomaly "
                             "(guidellm's windowed peak rate): said once, not per run.")
