"""The results-file backend of `SweepStore`: one sweep's runs in the seed-results.json format.

A results file is what a sweep exports (`results.json` beside its report, `farm report --out`)
and what the seed's own measurements were written as. It holds runs, not trials, and no study:
a trial's status here is derived from its runs (below), and the grid's pending trials are unknown.
"""

from __future__ import annotations

from pathlib import Path

from farm.analysis.records import Results
from farm.analysis.results import Status
from farm.analysis.results_file import read_results_file
from farm.errors import UserError
from farm.store.base import SweepInfo, TrialEntry
from farm.store.schema import sweep_name

# A trial that ran ends with the most serious of its runs' statuses, in the order the trial actor
# ranks them (actors/bench.py); a status no run can have (the engine never started, a bad flag,
# a missing dataset) is on the records of the profiles that never ran, and comes first.
RUN_SEVERITY = (Status.engine_crashed, Status.oom, Status.timeout, Status.connection_error, Status.bench_failed,
                Status.low_success_rate)


def trial_status(statuses: list[Status]) -> Status:
    before_runs = [s for s in statuses if s not in RUN_SEVERITY and s != Status.ok]
    if before_runs:
        return before_runs[0]
    return next((s for s in RUN_SEVERITY if s in statuses), Status.ok)


class ResultsFileStore:
    """The one sweep in the results file at `path` (read once, on first use)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._results: Results | None = None

    @property
    def where(self) -> str:
        return str(self.path)

    def _load(self) -> Results:
        if self._results is None:
            self._results = read_results_file(self.path)
        return self._results

    def _own_id(self) -> str:
        return self._load().sweep_id or str(self.path)

    def _check(self, sweep_id: str | None) -> None:
        if sweep_id is not None and sweep_id != self._own_id():
            raise UserError(f"holds sweep '{self._own_id()}', not '{sweep_id}'", file=self.where)

    def latest_sweep(self) -> str:
        return self._own_id()

    def sweep(self, sweep_id: str | None = None) -> SweepInfo | None:
        if sweep_id is not None and sweep_id != self._own_id():
            return None
        r = self._load()
        name = sweep_name(r.study, r.grid) if r.study and r.grid else (r.study or self.where)
        return SweepInfo(sweep_id=self._own_id(), name=name, study=r.study, grid=r.grid, status="finished")

    def study(self, sweep_id: str | None = None) -> None:
        self._check(sweep_id)
        return None  # a results file carries the profiles its runs asked for, not the study

    def planned_trial_ids(self, sweep_id: str | None = None) -> None:
        self._check(sweep_id)
        return None  # it lists the runs that ended, not the grid

    def trials(self, sweep_id: str | None = None) -> list[TrialEntry]:
        self._check(sweep_id)
        by_trial: dict[str, list] = {}
        for rec in self._load().records:
            by_trial.setdefault(rec.trial, []).append(rec)
        out = []
        for trial_id, recs in by_trial.items():
            status = trial_status([r.status for r in recs])
            reason = next((r.reason for r in recs if r.status == status and r.reason), None)
            out.append(TrialEntry(trial_id, recs[0].label, status.value, reason))
        return out

    def records(self, sweep_id: str | None = None, study=None) -> Results:
        """The file's runs; `study` is not needed (the file carries its profiles)."""
        self._check(sweep_id)
        return self._load()
