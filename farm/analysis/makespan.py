"""How well a sweep kept its GPUs busy: its makespan against the least it could have taken.

The ideal is max(the longest trial, GPU-seconds the trials held / GPUs): no order of the same
trials on the same GPUs finishes sooner. Efficiency = ideal / makespan (1.0: no GPU waited).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Held:
    """One trial's hold on the cluster: from its actor's start to its end, on `gpus` GPUs."""

    started: float
    finished: float
    gpus: int

    @property
    def seconds(self) -> float:
        return max(self.finished - self.started, 0.0)


@dataclass(frozen=True)
class ClusterUse:
    trials: int
    gpus: int
    makespan_s: float
    ideal_s: float
    gpu_seconds: float

    @property
    def efficiency(self) -> float:
        return self.ideal_s / self.makespan_s if self.makespan_s > 0 else 0.0

    @property
    def busy(self) -> float:
        """Share of the cluster's GPU-seconds over the makespan that a trial held."""
        return self.gpu_seconds / (self.gpus * self.makespan_s) if self.makespan_s > 0 and self.gpus else 0.0


def cluster_use(held: Iterable[Held], gpus: int) -> ClusterUse:
    """Makespan (first start to last end), ideal and GPU-seconds of trials that held GPUs."""
    if gpus <= 0:
        raise ValueError(f"gpus must be positive, got {gpus}")
    rows = [h for h in held if h.gpus > 0]
    if not rows:
        return ClusterUse(trials=0, gpus=gpus, makespan_s=0.0, ideal_s=0.0, gpu_seconds=0.0)
    makespan = max(h.finished for h in rows) - min(h.started for h in rows)
    gpu_s = sum(h.seconds * h.gpus for h in rows)
    ideal = max(max(h.seconds for h in rows), gpu_s / gpus)
    return ClusterUse(trials=len(rows), gpus=gpus, makespan_s=makespan, ideal_s=ideal, gpu_seconds=gpu_s)


def sittings(held: Iterable[Held], gap_s: float = 60.0) -> list[list[Held]]:
    """Trials split where no trial held anything for more than `gap_s`: a sweep resumed on a later
    machine (a new GPU lease) is measured per machine, not across the hours between them."""
    rows = sorted((h for h in held if h.gpus > 0), key=lambda h: h.started)
    out: list[list[Held]] = []
    end = None
    for h in rows:
        if end is None or h.started - end > gap_s:
            out.append([])
            end = h.finished
        out[-1].append(h)
        end = max(end, h.finished)
    return out
