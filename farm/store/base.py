"""What the reading commands ask of a stored sweep, whatever stores it.

`farm report`, `farm analyze`, `farm status` and `--resume` read a sweep through `SweepStore`:
its metadata (`SweepInfo`), its trials and how each ended (`TrialEntry`), the study it ran and
its benchmark runs as selection reads them (`Results`). Two backends implement it: MLflow
(`farm.store.mlflow_store`, what a sweep writes) and a results file
(`farm.store.results_store`, what `farm report --out` and the end of a sweep export, and the
seed's own file). tests/unit/store/test_store_contract.py holds both to the same answers.

Pure: no mlflow import (the MLflow backend imports it, this module does not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from farm.analysis.records import Results
from farm.analysis.outcome import FINISHED
from farm.study.spec import Study


@dataclass(frozen=True)
class SweepInfo:
    """A stored sweep's metadata."""

    sweep_id: str
    # "study · grid GRID · START" as a sweep names its parent run ("study:grid" before), a results
    # file "study · grid GRID" (it holds no start), else its study or path
    name: str
    study: str | None
    grid: str | None
    status: str  # running, finished, partial, killed, interrupted, failed ("finished" for a results file)
    experiment_id: str | None = None  # MLflow's; None elsewhere
    # an interrupted sweep: why farm knows its driver is gone, and the command it ran (to resume)
    interrupted: str | None = None
    command: str | None = None


@dataclass(frozen=True)
class TrialEntry:
    """One trial of a sweep and how its latest stored attempt ended."""

    id: str
    label: str  # its name, or its id
    status: str | None  # farm's result status; None: no result stored yet (pending)
    reason: str | None = None

    @property
    def finished(self) -> bool:
        """Whether the trial has a final answer (resume does not run it again)."""
        return self.status in {s.value for s in FINISHED}


@runtime_checkable
class SweepStore(Protocol):
    """Read access to stored sweeps. `sweep_id=None` means the latest sweep (a results file
    holds one)."""

    @property
    def where(self) -> str:
        """The store, as messages name it (a tracking URI, a file path)."""

    def latest_sweep(self) -> str:
        """The id of the most recent sweep; `UserError` when there is none."""

    def sweep(self, sweep_id: str | None = None) -> SweepInfo | None:
        """The sweep's metadata, or None when the store has no such sweep."""

    def study(self, sweep_id: str | None = None) -> Study | None:
        """The study the sweep ran, as stored beside it (secrets masked); None if none is stored."""

    def planned_trial_ids(self, sweep_id: str | None = None) -> set[str] | None:
        """Every trial the sweep's grid expanded to; None when the store does not know them."""

    def trials(self, sweep_id: str | None = None) -> list[TrialEntry]:
        """The sweep's trials (planned ones first, in grid order), each with its latest status."""

    def records(self, sweep_id: str | None = None, study: Study | None = None) -> Results:
        """The sweep's benchmark runs as selection reads them; `study` (default: the stored one)
        supplies what the runs asked for where the store keeps only the results."""


def finished_trial_ids(store: SweepStore, sweep_id: str) -> set[str]:
    """Trials of the sweep that have a final answer (resume does not run them again)."""
    return {t.id for t in store.trials(sweep_id) if t.finished}
