"""The guarded local search's models (pure): a neighbour, a repaired trial, a judged neighbour, a
step and the search's plan (farm/analysis/local_search.py plans them; the report and the store read
them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from farm.analysis.halving import Rung
from farm.strict import Strict


class Neighbour(Strict):
    trial: str
    axis: str = Field(description="The coordinate it changes (`knob:<name>`, `--<flag>`, model, engine).")
    value: Any = Field(description="Its value there.")
    was: Any = Field(default=None, description="The incumbent's value there.")



class Repair(Strict):
    """A trial that cannot start here, and the nearest configuration that does: the same
    coordinates with its requests at once capped at the limit the engine named (after a failed
    start) or the memory-fit model predicts (before any GPU time). The search races the repaired
    trial in the original's place; the report labels it farm's repair."""

    trial: str = Field(description="The trial as given (the user's command, where it is the start).")
    repaired: str = Field(description="The repaired trial's id.")
    knob: str = "max_running_requests"
    value: int = Field(description="The knob's value in the repair.")
    source: Literal["engine", "predicted"] = Field(description="engine: the limit its failed start named; predicted: "
                                                   "the memory-fit model's, before any start.")
    cause: str = Field(description="Why the trial as given does not start.")
    gpu: str | None = Field(default=None, description="The GPU model it does not start on.")



def start_failure_text(r: Repair, labels: Mapping[str, str] | None = None) -> str:
    """'your command does not start on H100: <cause>' and what farm searched from instead."""
    on = f" on {r.gpu}" if r.gpu else ""
    how = "its start failed" if r.source == "engine" else "predicted before any start"
    return (f"does not start{on} ({how}): {r.cause}; farm's repair: {r.knob} = {r.value:,}"
            + (f" ({(labels or {}).get(r.repaired, r.repaired)})" if labels else ""))



class Judged(Strict):
    """One neighbour against the incumbent in one step."""

    neighbour: Neighbour
    runs: int
    relative_pct: float | None = None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    p_holm: float | None = None
    better: bool = Field(default=False, description="Significantly better by at least the margin: the search may move.")
    decision: str | None = Field(default=None, description="better, worse, equivalent or undecided "
                                 "(farm/analysis/stats/verdict.py decide), at the step's alpha and the study's margin.")
    settled: bool = Field(default=False, description="Proven not better by more than the margin: the upper end of the "
                          "ratio's (1 - 2 alpha) interval lies below 1 + margin.")
    more_runs: int | None = Field(default=None, description="Neither better nor settled: runs each side still needs "
                                  "at the current noise (None: none that can be said).")
    why: str



class Step(Strict):
    """One step of the search: who raced, what each neighbour showed, where the search went."""

    index: int
    incumbent: str
    race: list[str] = Field(description="Trial ids run this step, the incumbent first.")
    alpha: float
    incumbent_runs: int = 0
    judged: list[Judged] = Field(default_factory=list)
    combination: str | None = Field(default=None, description="Raced as the combination of the step before's winners.")
    unraced: list[str] = Field(default_factory=list, description="Neighbours the budget did not pay for.")
    outcome: str = Field(default="pending", description="moved, converged (each raced neighbour proven not better by "
                         "more than the margin), undecided (one could not be told yet), failed, or pending (not measured "
                         "yet).")
    so_far: dict[str, list[float]] = Field(default_factory=dict, description="A pending step: the total tok/s of each "
                                           "trial's runs measured so far.")
    measured_nothing: dict[str, str] = Field(default_factory=dict, description="A pending step: the raced trials that "
                                             "ran and measured nothing usable, each with its status and the reason.")
    moved_to: str | None = None



class SearchPlan(Strict):
    """What to run next, or why the search is done; the path so far."""

    start: str
    incumbent: str
    given_start: str | None = Field(default=None, description="The start as the user gave it, where it could not "
                                    "start and `start` is farm's repair of it.")
    repairs: list[Repair] = Field(default_factory=list, description="Trials raced in a repaired form (the start among them).")
    steps: list[Step] = Field(default_factory=list)
    done: bool = False
    stop: str | None = Field(default=None, description="converged, budget, undecided, failed, or start_fails (the start cannot "
                             "start and the study asks for no repair), once the search is over.")
    reason: str = ""
    rung: Rung | None = Field(default=None, description="What the next jobs run.")
    trials: list[str] = Field(default_factory=list, description="Trial ids of the next jobs.")
    final: bool = Field(default=False, description="The next jobs (or the done plan's last) are the final comparison.")
    spent_gpu_hours: float = 0.0
    spent_by_phase: dict[str, float] = Field(default_factory=dict, description="search / final -> GPU-hours.")
    budget_gpu_hours: float | None = None
    estimate_gpu_hours: float = 0.0
