"""The MLflow backend of `SweepStore`: a sweep as farm/store/tracking.py wrote it.

The parent run carries the sweep's metadata and, under `sweep/`, its study and trial list; each
child run carries one trial attempt, whose `result.json` is the whole `TrialResult`. The
latest child of a trial (by start time) is its answer, as `--resume` and `farm report` agree.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from pathlib import Path

from farm.analysis.records import Results, records_from_trials
from farm.analysis.results import TrialResult
from farm.errors import UserError
from farm.inputs import read_yaml_file
from farm.store import schema as S
from farm.store import tracking
from farm.store.base import SweepInfo, TrialEntry
from farm.study.load import validate_study
from farm.study.spec import Study
from farm.study.trial import Trial


class MlflowStore:
    """Sweeps in the MLflow tracking store at `uri` (sqlite:///PATH or a server)."""

    def __init__(self, uri: str, *, key: str = "--tracking-uri"):
        self.uri = uri
        self.key = key  # where the URI came from, for its errors (farm.inputs.tracking_source)

    @property
    def where(self) -> str:
        return self.uri

    def _id(self, sweep_id: str | None) -> str:
        return sweep_id or self.latest_sweep()

    def latest_sweep(self, study: str | None = None, exclude: str | None = None) -> str:
        """The newest sweep in the store (of study `study`, when given; other than `exclude`)."""
        ids = self.sweep_ids(study, exclude=exclude, limit=1)
        if not ids:
            raise UserError(f"no sweep{f' of study {study}' if study else ''} in {self.uri}", key=self.key)
        return ids[0]

    def sweep_ids(self, study: str | None = None, exclude: str | None = None, limit: int = 10) -> list[str]:
        """The newest `limit` sweeps in the store, newest first (of study `study`, when given; other
        than `exclude`)."""
        c = tracking.client(self.uri)
        exps = [e.experiment_id for e in c.search_experiments()]
        where = S.sweeps_filter() + (f" and tags.`{S.STUDY_TAG}` = '{study}'" if study else "")
        runs = c.search_runs(exps, filter_string=where, order_by=["attributes.start_time DESC"],
                             max_results=limit + (1 if exclude else 0)) if exps else []
        return [r.info.run_id for r in runs if r.info.run_id != exclude][:limit]

    def sweep(self, sweep_id: str | None = None) -> SweepInfo | None:
        sweep_id = self._id(sweep_id)
        run = tracking.get_sweep(self.uri, sweep_id)
        if run is None:
            return None
        tags = run.data.tags
        # a sweep left "running" by a driver that is gone is marked interrupted now (tracking.interruption)
        gone = tracking.interruption(self.uri, run)
        return SweepInfo(sweep_id=sweep_id, name=run.info.run_name or "", study=tags.get(S.STUDY_TAG),
                         grid=tags.get(S.GRID_TAG),
                         status=S.SWEEP_INTERRUPTED if gone else tags.get(S.STATUS_TAG, "?"),
                         experiment_id=run.info.experiment_id, interrupted=gone[0] if gone else None,
                         command=gone[1] if gone else run.data.params.get("command"))

    def _artifact(self, sweep_id: str, path: str, read):
        raw = tracking.read_artifact(self.uri, sweep_id, path)
        if raw is None:  # a sweep stored without it
            return None
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / Path(path).name
            local.write_bytes(raw)
            return read(str(local))

    def study(self, sweep_id: str | None = None) -> Study | None:
        sweep_id = self._id(sweep_id)
        shown = f"sweep {sweep_id}: {S.STUDY_PATH}"
        # Read like a user's study: a snapshot an older farm stored may not fit this one's schema.
        study = self._artifact(sweep_id, S.STUDY_PATH,
                               lambda path: validate_study(read_yaml_file(path, shown=shown), shown))
        return None if study is None else self._with_kept_reference(sweep_id, study)

    def _with_kept_reference(self, sweep_id: str, study: Study) -> Study:
        """The stored study, its reference results read from the sweep's own copy where the file it
        names (a path of the machine the sweep ran on) is not on this one."""
        ref = study.reference
        if ref is None or Path(ref.results).is_file():
            return study
        raw = tracking.read_artifact(self.uri, sweep_id, S.REFERENCE_PATH)
        if raw is None:  # stored before sweeps kept a copy: the report says it is missing
            return study
        folder = Path(tempfile.mkdtemp(prefix="farm-reference-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        copy = folder / Path(ref.results).name
        copy.write_bytes(raw)
        return study.model_copy(update={"reference": ref.model_copy(update={"results": str(copy)})})

    def _trial_list(self, sweep_id: str) -> list[dict] | None:
        return self._artifact(sweep_id, S.TRIALS_PATH, lambda path: json.loads(Path(path).read_text()))

    def planned_trials(self, sweep_id: str | None = None) -> list[Trial] | None:
        """The trials the sweep's grid expanded to, as stored when it started (secret flags masked,
        ids as run); None for a sweep stored without its list."""
        listed = self._trial_list(self._id(sweep_id))
        return None if listed is None else [Trial.model_validate(t) for t in listed]

    def planned_trial_ids(self, sweep_id: str | None = None) -> set[str] | None:
        listed = self._trial_list(self._id(sweep_id))
        return None if listed is None else {t["id"] for t in listed}

    def trials(self, sweep_id: str | None = None) -> list[TrialEntry]:
        sweep_id = self._id(sweep_id)
        latest = {}
        for child in sorted(tracking.trial_runs(self.uri, sweep_id), key=lambda r: r.info.start_time or 0):
            latest[child.data.tags.get(S.TRIAL_TAG, "")] = child
        labels = {t["id"]: t.get("name") or t["id"] for t in self._trial_list(sweep_id) or []}
        for trial_id in latest:
            labels.setdefault(trial_id, trial_id)
        out = []
        for trial_id, label in labels.items():
            child = latest.get(trial_id)
            tags = child.data.tags if child is not None else {}
            out.append(TrialEntry(trial_id, label, tags.get(S.STATUS_TAG), tags.get(S.REASON_TAG)))
        return out

    def records(self, sweep_id: str | None = None, study: Study | None = None) -> Results:
        sweep_id = self._id(sweep_id)
        info = self.sweep(sweep_id)
        if info is None:
            raise UserError(f"no sweep with id '{sweep_id}' in {self.uri}", key="SWEEP_ID")
        study = study or self.study(sweep_id)
        if study is None:
            raise UserError(f"sweep {sweep_id} has no stored study ({S.STUDY_PATH})", key=f"sweep {sweep_id}")
        return records_from_trials(self.results(sweep_id), study, grid=info.grid, sweep_id=sweep_id)

    def results(self, sweep_id: str | None = None) -> list[TrialResult]:
        """Each trial's latest stored result, whole (what `records` reads its runs from)."""
        return tracking.load_results(self.uri, self._id(sweep_id))
