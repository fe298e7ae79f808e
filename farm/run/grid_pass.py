"""`--strategy grid` as a strategy of the one runner (farm/run/search.py): its first pass.

Every trial of the grid not yet finished, and the baseline once more on each other node (node
controls, pinned there), in one round whose order the scheduler picks (farm/analysis/schedule.py).
The strategy builds that round (`FirstPass`) from what the driver resolved (`SearchContext`: the
trials a resume left and that can be measured, the node controls of the nodes there are, the
durations the scheduler orders it at); the runner runs it like any other round. Each job logs its own trial run
(the trial actor), so the runner stores nothing for it. `--repeats auto` follows it with its later
passes (farm/run/passes.py `RepeatsAuto`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from farm.analysis import schedule
from farm.analysis.results import Status, TrialResult
from farm.run.search import BaseStrategy, SearchContext, Stored, register
from farm.strict import Strict


@dataclass
class FirstPass:
    """The first pass: its jobs, the nodes node controls are pinned to, the scheduler's items (None:
    in job order), and the sweep's trials finished before (a resume)."""

    jobs: list = field(default_factory=list)
    pins: dict[str, str] = field(default_factory=dict)
    items: Any = None
    finished_before: Sequence[TrialResult] = ()


class GridPlan(Strict):
    """The grid's plan: its first pass, or done."""

    done: bool
    reason: str
    trials: list[str] = Field(default_factory=list, description="Trial ids of the first pass, node controls included.")


@register("grid")
class Grid(BaseStrategy):
    """One round, the first pass; then done."""

    schedules = True
    once = True

    def __init__(self, ctx: SearchContext) -> None:
        super().__init__(ctx)
        self.first_pass: FirstPass = first_pass(ctx)

    def plan(self, stored: list[TrialResult], first: bool) -> GridPlan:
        if first and self.first_pass.jobs:
            ids = [j.trial.id for j in self.first_pass.jobs]
            return GridPlan(done=False, reason=f"first pass: {len(ids)} trial(s)", trials=ids)
        return GridPlan(done=True, reason="the first pass ran")

    def jobs(self, p: GridPlan, stored: list[TrialResult], first: bool) -> list:
        return list(self.first_pass.jobs)

    def options(self, p: GridPlan) -> dict:
        fp = self.first_pass
        return {"pins": fp.pins, "items": fp.items, "finished_before": fp.finished_before}

    def store(self, new: TrialResult, previous: TrialResult | None, p: GridPlan) -> Stored | None:
        # each trial actor logged its own run (or run_trials logged its loss); a cancelled one runs again on resume
        return None if new.status == Status.cancelled else Stored(by_actor=True)

    def stopped(self, p: GridPlan) -> GridPlan:
        return p.model_copy(update={"done": True, "reason": "the first pass measured nothing"})


def first_pass(ctx: SearchContext) -> FirstPass:
    """The grid's first pass: each trial left to run and each node control, `first_repeats` runs a
    profile; the node controls pinned to their nodes; ordered by the scheduler where the sweep is
    scheduled (at `schedule_at`'s durations); a resume's stored results are the trials finished before."""
    jobs = [ctx.make_job(t, ctx.first_repeats, 1) for t in ctx.todo + [t for t, _ in ctx.controls]]
    return FirstPass(jobs=jobs, pins={t.id: node for t, node in ctx.controls},
                     items=schedule.items_of(ctx.study, [j.trial for j in jobs], ctx.schedule_at) if ctx.scheduled else None,
                     finished_before=ctx.stored if ctx.resumed else ())
