"""The capacity ranking's output models (the JSON of a report's `selection.capacity`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from farm.analysis.capacity import Stop
from farm.strict import Strict


class CapacityPoint(Strict):
    """One run of a trial's search: a point of its latency and throughput curves."""

    load: float
    meets: bool
    total_tps: float | None = None
    output_tps: float | None = None
    request_rate: float | None = None
    goodput_rps: float | None = None
    ttft_p95_ms: float | None = None
    tpot_mean_ms: float | None = None
    success_rate: float | None = None
    misses: list[str] = Field(default_factory=list, description="The limits this run broke, with by how much.")


class CapacityRow(Strict):
    """One trial's capacity on one capacity profile."""

    trial: str
    label: str
    capacity: float | None = Field(description="Highest load that met the SLO; none: not even the lowest.")
    high: float | None = Field(description="Lowest load that broke the SLO; none: no load tried broke it.")
    interval: str
    stop: Stop
    why_stopped: str
    total_tps: float | None = Field(default=None, description="Throughput at the capacity.")
    request_rate: float | None = Field(default=None, description="Requests per second at the capacity.")
    goodput_rps: float | None = Field(default=None, description="guidellm's goodput at the capacity (slo.goodput).")
    runs: int
    complexity: int = 0
    curve: list[CapacityPoint]
    worst_miss: float | None = Field(default=None, description="No capacity: its largest miss at the lowest load, "
                                     "as a share of the limit (what 'closest' ranks by).")
    misses_at_lowest: list[str] = Field(default_factory=list)


class CapacityRanking(Strict):
    """Every trial's capacity on one profile, ranked, and what selection makes of it."""

    profile: str
    over: Literal["concurrency", "rate"]
    unit: str
    rows: list[CapacityRow] = Field(description="Most capacity first; trials without one last, closest first.")
    decision: Literal["winner", "tie", "only_candidate", "none"]
    recommended: str | None
    leader: str | None
    tied: list[str] = Field(default_factory=list)
    reason: str
    ttft_p95_ms_max: float | None = Field(default=None, description="The SLO's limits, for the plots' lines.")
    tpot_mean_ms_max: float | None = None
    min_success_rate: float

    def row(self, trial: str) -> CapacityRow | None:
        return next((r for r in self.rows if r.trial == trial), None)
