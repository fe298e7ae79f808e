"""Which trial starts next, and on which node, so that GPUs spend their hours measuring.

Three things cost GPU time that a plain queue wastes (issue "The farm's own cost"):

- compiling: an engine starts in 103 s with its compile cache warm and 241 s cold on the H200,
  and the cache lives on the node (farm's node cache dir). Configurations that compile the same
  graph (`Engine.compile_key`: same engine, model and compile flags) form a group; a node claims a
  group and runs its trials one after another, so each group starts cold once per sweep, not
  once per trial. A second trial of a group waits for the first one's start to end rather than
  compile beside it, unless waiting would cost more than compiling again.
- packing: a trial needs all its GPUs on one node at once. Larger trials go first, while whole
  nodes are free; single free GPUs are filled by smaller ones.
- the tail: within what a node may take, the longest trial (by the GPU-hour estimate) goes first.

Estimates: the engines' defaults (`Engine.start_estimate_s`) and the seed's run durations, or,
where the study's earlier sweep measured them (farm/analysis/durations.py, read from MLflow by
farm/run/estimate.py when a sweep starts), its medians: per engine its cold and its warm starts,
per profile one run's wall time. What a cluster really takes decides what goes first and whether
waiting for a warm cache pays.

Pure: the driver (farm/run/driver.py) tells it the free GPUs of each node and the time, and
starts what it picks there with node affinity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from farm.study.grid import MeasuredDurations, compile_group, run_seconds, trial_starts
from farm.study.spec import Study
from farm.study.trial import Trial


@dataclass(frozen=True)
class Item:
    """A trial as the scheduler sees it."""

    id: str
    gpus: int
    seconds: float  # estimated wall time with a warm start
    cold_start_s: float = 0.0  # estimated engine start with a cold compile cache
    warm_start_s: float = 0.0  # ... and with a warm one
    group: str | None = None  # compile key; None: nothing to share
    nodes: frozenset[str] | None = None  # where it may run; None: any node
    avoid: frozenset[str] = frozenset()  # where it ran before (a retry): elsewhere if possible

    @property
    def cold_extra_s(self) -> float:
        return max(self.cold_start_s - self.warm_start_s, 0.0)

    @property
    def gpu_seconds(self) -> float:
        return self.gpus * self.seconds


def item_of(trial: Trial, seconds: float, cold_start_s: float, warm_start_s: float,
            nodes: frozenset[str] | None = None, avoid: frozenset[str] = frozenset()) -> Item:
    key = compile_group(trial)
    return Item(id=trial.id, gpus=trial.gpus, seconds=seconds, cold_start_s=cold_start_s, warm_start_s=warm_start_s,
                group=key if key is not None else f"trial:{trial.id}", nodes=nodes, avoid=avoid)


def order(items: list[Item]) -> list[Item]:
    """The plan as one list: larger trials first, then groups by their GPU-seconds (largest first),
    each group's trials together, longest first. What a single queue would run."""
    totals: dict[str | None, float] = {}
    for i in items:
        totals[i.group] = totals.get(i.group, 0.0) + i.gpu_seconds
    return sorted(items, key=lambda i: (-i.gpus, -totals[i.group], str(i.group), -i.seconds, i.id))


@dataclass
class Dispatcher:
    """Picks the next (trial, node) as GPUs free up; `started`/`finished` keep it informed."""

    pending: list[Item]
    owner: dict[str, str] = field(default_factory=dict)  # group -> the node that claimed it
    warm_at: dict[tuple[str, str], float] = field(default_factory=dict)  # (node, group) -> cache written

    def __post_init__(self) -> None:
        self.pending = order(self.pending)

    def add(self, item: Item) -> None:
        """A trial to run again (a retry)."""
        self.pending = order(self.pending + [item])

    def started(self, item: Item, node: str, now: float) -> None:
        if item.group is None:
            return
        self.owner.setdefault(item.group, node)
        # The first start of a group on a node writes its cache when it is ready.
        self.warm_at.setdefault((node, item.group), now + item.cold_start_s)

    def _fits(self, item: Item, node: str, free: int) -> bool:
        return item.gpus <= free and (item.nodes is None or node in item.nodes)

    def pick(self, node: str, free: int, now: float, others: Mapping[str, int]) -> Item | None:
        """The item to start on `node` (with `free` GPUs) now, or None (nothing fits, or waiting
        for a warm cache is cheaper); `others`: the other nodes' free GPUs (a retry goes there first)."""
        fits = [i for i in self.pending if self._fits(i, node, free)
                and not (node in i.avoid and any(self._fits(i, n, f) for n, f in others.items() if n not in i.avoid))]
        if not fits:
            return None
        warm, new, waiting, stolen = [], [], [], []
        for i in fits:
            ready = self.warm_at.get((node, i.group))
            if ready is not None and ready <= now:
                warm.append(i)
            elif i.group not in self.owner:
                new.append(i)
            elif ready is not None:
                waiting.append((ready - now, i))
            else:
                stolen.append(i)
        # `fits` keeps the plan's order (larger first, then groups, longest first).
        if warm:
            return max(warm, key=lambda i: (i.gpus, i.seconds))
        if new:
            return new[0]
        best_wait = min(waiting, key=lambda w: w[0]) if waiting else None
        if best_wait is not None and best_wait[0] <= best_wait[1].cold_extra_s:
            return None  # its cache is written sooner than compiling again would take
        cold = stolen + [i for _, i in waiting]
        return max(cold, key=lambda i: (i.gpus, i.seconds)) if cold else None

    def next(self, free: Mapping[str, int], now: float) -> tuple[Item, str] | None:
        """One (item, node) to start now, taken off the pending list, or None."""
        for node in sorted(free, key=lambda n: (-free[n], n)):
            if free[node] <= 0:
                continue
            others = {n: f for n, f in free.items() if n != node}
            item = self.pick(node, free[node], now, others)
            if item is not None:
                self.pending.remove(item)
                return item, node
        return None



def items_of(study: Study, trials: list[Trial], measured: MeasuredDurations | None = None) -> dict[str, Item]:
    """Trial id -> Item at the engines' start estimates and the seed's run durations, or at what
    `measured` (the study's earlier sweep) holds of them."""
    out = {}
    for t in trials:
        cold, warm = trial_starts(t, measured)  # the grid estimate's rule too
        out[t.id] = item_of(t, warm + run_seconds(study, t, measured=measured), cold, warm)
    return out


def estimates_line(measured: MeasuredDurations | None, why_default: str | None = None) -> str:
    """One line for the sweep's opening: where the scheduler's estimates come from."""
    if measured is None:
        return "schedule: default estimates (engine start estimates, the seed's run durations)" + (
            f"; {why_default}" if why_default else "")

    def start(e: str) -> str:
        kinds = [f"{kind} {d[e]:.0f} s" for kind, d in (("cold", measured.cold_start_s), ("warm", measured.warm_start_s))
                 if e in d]
        return f"{e} {' / '.join(kinds) if kinds else f'{measured.start_s[e]:.0f} s'}"

    engines = sorted(set(measured.start_s) | set(measured.cold_start_s) | set(measured.warm_start_s))
    runs = ", ".join(f"{p} {s:.0f} s" for p, s in sorted(measured.profile_s.items()))
    return (f"schedule: durations measured in {measured.where} ({measured.runs} runs)"
            + (f"; starts {', '.join(start(e) for e in engines)}" if engines else "")
            + (f"; runs {runs}" if runs else "") + "; defaults for the rest")
