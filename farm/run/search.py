"""One search protocol and the one runner loop that executes it (issue 52).

A sweep strategy that goes on after its first trials (`--repeats auto`'s later passes, halving's
rungs, the local search's steps) is a `Strategy`: it answers, from what the store holds, what runs
next (its plan, `done` when nothing does), which jobs that plan's round runs, how each finished job
is stored, and how its plan is recorded. `run_search` is the loop they share: read the store, plan,
run the round, store each job as it ends, plan again. Every decision comes from the stored results,
so a resumed sweep continues where the store says it stands, whatever the strategy.

Strategies register by name (`register`); the driver asks the registry (`strategy_for`) and never
branches on a name, so a new strategy is one module and its tests. Effects layer (MLflow through
farm/store only).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from farm.analysis.results import TrialResult
from farm.study.spec import Study
from farm.study.trial import Trial

# The modules whose import registers a strategy; a new strategy adds its module here.
STRATEGY_MODULES = ("farm.run.grid_pass", "farm.run.passes", "farm.run.halving", "farm.run.local_search")


@dataclass
class SearchContext:
    """What every strategy is built from: the sweep as the driver resolved it."""

    study: Study
    grid: str
    trials: list[Trial]
    tracking_uri: str
    experiment_id: str
    sweep_id: str
    # make_job(trial, repeats, pass_index): the driver's job for one trial (farm/run/driver.py)
    make_job: Callable[[Trial, int, int], Any]
    budget_gpu_hours: float | None = None
    pruned: dict[str, str] | None = None
    start: str | None = None
    measured: Any = None  # the durations earlier sweeps measured (farm/run/estimate.py), where one prices steps
    # What the grid's first pass is built from (farm/run/grid_pass.py): the trials left to run, the
    # baseline's node controls (trial, Ray node), the first pass's repeats, the durations its
    # scheduler orders it at (None: in job order), and the results stored when the sweep (re)started.
    todo: list[Trial] = field(default_factory=list)
    controls: list[tuple[Trial, str]] = field(default_factory=list)
    first_repeats: int = 1
    schedule_at: Any = None
    scheduled: bool = False
    stored: list[TrialResult] = field(default_factory=list)
    resumed: bool = False


@dataclass(frozen=True)
class Stored:
    """How the runner stores one finished job: appended to its trial's run as pass `index`
    (`merged`: the trial's result with it), logged as the trial's first run (`first`), or left as its
    actor stored it (`by_actor`)."""

    merged: TrialResult | None = None
    index: int = 0
    first: TrialResult | None = None
    by_actor: bool = False


class Strategy(Protocol):
    """A search over recorded results. `plan` and `jobs` decide; the runner does the rest."""

    name: str

    def begin(self) -> None:
        """Once per runner call, before the first plan: what the strategy records of itself."""

    def plan(self, stored: list[TrialResult], first: bool) -> Any:
        """What runs next, from the sweep's stored results (`first`: this call's first plan, where an
        interrupted round is picked up). A plan has `done`."""

    def jobs(self, plan: Any, stored: list[TrialResult], first: bool) -> list[Any]:
        """The jobs of the plan's round, in the order they run."""

    def store(self, new: TrialResult, previous: TrialResult | None, plan: Any) -> Stored | None:
        """How a finished job is stored; None: nothing measured, the trial keeps what it had."""

    def record(self, plan: Any) -> None:
        """Store the plan (where the strategy keeps one)."""

    def after_store(self, plan: Any, how: Stored) -> None:
        """A job of the plan's round was just stored, as `how` says (its merged or first result)."""

    def stopped(self, plan: Any) -> Any:
        """The last plan when a round measured nothing."""

    def options(self, plan: Any) -> dict:
        """What the round's runner needs beside its jobs (placement pins, the scheduler's order)."""


class BaseStrategy:
    """The defaults a strategy may keep: nothing recorded of itself or its plans."""

    name = ""
    # It prices its steps at the durations earlier sweeps measured (SearchContext.measured).
    prices_steps = False
    # It leaves out the trials the memory fit says cannot start (SearchContext.pruned).
    prunes_unfit = False
    # Its round is ordered by the scheduler (a grid of GPU trials: farm/analysis/schedule.py).
    schedules = False
    # It runs the grid's trials once and plans nothing more: a resume whose trials all finished
    # has nothing to run.
    once = False
    # Which of the driver's callbacks hears its plans: "pass" (on_pass), "rung" (on_rung) or None.
    announces: str | None = None
    # `farm sweep --strategy NAME` may name it (one that only follows another may not: `--repeats
    # auto`'s passes follow the grid's first pass).
    chosen = True
    # What the sweep's options mean to it: a GPU-hour budget (--budget); a start (--from: a serve
    # command or a trial, which is also its baseline); its own rungs and repeats (then --repeats auto
    # and --trial do not combine with it).
    takes_budget = False
    starts_from = False
    plans_repeats = False
    title = ""  # what a person calls it ("local search"); its name where empty

    @classmethod
    def dry_run_lines(cls, study: Study, grid: str, trials: list[Trial], *, fits: dict, measured: Any = None,
                      start: str | None = None, waits: bool = False) -> list[str]:
        """What `farm sweep --dry-run` says of it before anything runs: its plan and price (`fits`: the
        memory-fit predictions by trial id; `waits`: the GPU model comes from the cluster)."""
        return []

    @classmethod
    def resume_note(cls, study: Study, grid: str, uri: str, sweep_id: str) -> tuple[str, bool] | None:
        """What `farm sweep --dry-run --resume` says it runs next, from the stored results, and whether
        it runs more; None for one that runs the grid's trials once."""
        if cls.once:
            return None
        return f"the {cls.name} strategy plans its further runs from the stored results when it runs", True

    def __init__(self, ctx: SearchContext) -> None:
        self.ctx = ctx

    def begin(self) -> None:
        pass

    def record(self, plan: Any) -> None:
        pass

    def after_store(self, plan: Any, how: Stored) -> None:
        pass

    def options(self, plan: Any) -> dict:
        return {}


_REGISTRY: dict[str, type] = {}


def register(name: str):
    """Class decorator: the strategy `farm sweep` runs under `name`."""

    def add(cls: type) -> type:
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return add


def _load() -> dict[str, type]:
    """The registry, every strategy module imported (once: Python keeps a module imported)."""
    for module in STRATEGY_MODULES:
        importlib.import_module(module)
    return _REGISTRY


def chain(strategy: str, auto_repeats: bool) -> list[type]:
    """The registered strategies a sweep of `--strategy strategy` runs, in order: the grid's first
    pass, then `--repeats auto`'s later passes where asked; halving or the local search alone (their
    first round is the trials' first jobs)."""
    _load()
    if strategy not in _REGISTRY or strategy == "auto":
        raise KeyError(f"no search strategy {strategy!r} (registered: {', '.join(sorted(set(_REGISTRY) - {'auto'}))})")
    if strategy == "grid" and auto_repeats:
        return [_REGISTRY["grid"], _REGISTRY["auto"]]
    return [_REGISTRY[strategy]]


def strategy_for(name: str, ctx: SearchContext) -> Strategy:
    """The registered strategy `name`, built for this sweep."""
    _load()
    if name not in _REGISTRY:
        raise KeyError(f"no search strategy {name!r} (registered: {', '.join(sorted(_REGISTRY))})")
    return _REGISTRY[name](ctx)


def names() -> list[str]:
    return sorted(_load())


def choices() -> list[str]:
    """The strategies `farm sweep --strategy` may name (the CLI's choices), by name: registration
    order depends on which module a process imported first, and the choices and the refusals that
    list them read the same in every process."""
    return sorted(name for name, cls in _load().items() if cls.chosen)


def kind_of(strategy: str) -> type:
    """The registered strategy class `strategy` names (its facts: `takes_budget`, `starts_from`, ...)."""
    return chain(strategy, auto_repeats=False)[0]


@dataclass
class _Round:
    """The bookkeeping of one round while its jobs run."""

    previous: dict[str, TrialResult]
    run_ids: dict[str, str]
    kept: list[str] = field(default_factory=list)


def run_search(strategy: Strategy, ctx: SearchContext, *,
               run_jobs: Callable[[list, Callable[[TrialResult], None]], list[TrialResult]],
               on_plan: Callable[[Any], None] = lambda p: None) -> Any:
    """Round after round until the strategy's plan is done (or a round measured nothing); returns
    the last plan. `run_jobs(jobs, on_result, **options)` runs a round's jobs (the driver's `run_trials`;
    `options`: the strategy's for the round),
    handing each final result to `on_result` as its trial ends: each is stored at once, so a machine
    lost mid-round costs the trial in flight, not the round's trials before it."""
    from farm.store import tracking  # mlflow: not for the registry's readers (`farm sweep --dry-run`, its options)

    uri, sweep_id = ctx.tracking_uri, ctx.sweep_id
    strategy.begin()
    first = True
    while True:
        stored = tracking.load_results(uri, sweep_id)
        p = strategy.plan(stored, first)
        on_plan(p)
        strategy.record(p)
        if p.done:
            return p
        jobs = strategy.jobs(p, stored, first)
        first = False
        rnd = _Round(previous={r.trial.id: r for r in stored}, run_ids=tracking.trial_run_ids(uri, sweep_id))

        def on_result(new: TrialResult, p: Any = p, rnd: _Round = rnd) -> None:
            how = strategy.store(new, rnd.previous.get(new.trial.id), p)
            if how is None:
                return
            tid = new.trial.id
            artifacts = Path(new.artifacts_dir) if new.artifacts_dir else None
            if how.merged is not None:
                if tid not in rnd.run_ids:
                    return  # nowhere to put it: the trial keeps what it had
                tracking.append_pass(uri, rnd.run_ids[tid], how.merged, new, how.index, artifacts)
            elif how.first is not None:
                tracking.log_trial(uri, ctx.experiment_id, sweep_id, how.first, artifacts)
            rnd.kept.append(tid)
            strategy.after_store(p, how)

        run_jobs(jobs, on_result, **strategy.options(p))
        if not rnd.kept:
            stop = strategy.stopped(p)
            on_plan(stop)
            strategy.record(stop)
            return stop


def first_appearance(stored: list[TrialResult]) -> Callable[[Any, bool], bool]:
    """Whether a job's trial is new to the sweep (none of its results stored when the search began,
    not finished before in it): its end is one more trial of the sweep, where a trial run again is
    one more pass of it (the terminal view and the dashboard count them apart). Call with
    `finished=True` on the job's final event."""
    seen = {r.trial.id for r in stored}

    def new(job: Any, finished: bool = False) -> bool:
        tid = job.trial.id
        fresh = tid not in seen
        if finished:
            seen.add(tid)
        return fresh

    return new
