"""`farm status`: where a sweep stands, from MLflow (what finished) and Ray (what runs now).

The sweep's parent run lists all its trials (`sweep/trials.json`); each finished trial is a
child run with a status tag; a running trial is an alive actor in the sweep's Ray namespace
(`farm.run.ray_names.sweep_namespace`), which reports its trial id as its `repr_name`
(`actors.bench.BenchActor.__repr__`). The rest are pending.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from farm.errors import UserError
from farm.run.ray_names import sweep_namespace

STATES = ("done", "failed", "running", "pending")
KEY = "SWEEP_ID"


@dataclass
class TrialState:
    id: str
    label: str
    state: str  # done | failed | running | pending
    status: str | None = None  # farm's result status of a finished trial
    detail: str = ""


@dataclass
class SweepStatus:
    sweep_id: str
    name: str
    status: str  # the sweep's own: running, finished, killed, failed
    tracking_uri: str
    trials: list[TrialState] = field(default_factory=list)
    ray_checked: bool = False
    ray_note: str = ""

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for t in self.trials if t.state == s) for s in STATES}

    def as_dict(self) -> dict:
        return {"sweep_id": self.sweep_id, "name": self.name, "status": self.status, "tracking_uri": self.tracking_uri,
                "counts": self.counts(), "ray_checked": self.ray_checked,
                "trials": [t.__dict__ for t in self.trials]}


def latest_sweep(uri: str) -> str:
    from farm.store import tracking

    c = tracking.client(uri)
    exps = [e.experiment_id for e in c.search_experiments()]
    runs = c.search_runs(exps, filter_string=f"tags.`{tracking.KIND_TAG}` = 'sweep'",
                         order_by=["attributes.start_time DESC"], max_results=1) if exps else []
    if not runs:
        raise UserError(f"no sweep in {uri}", key="--tracking-uri")
    return runs[0].info.run_id


def _all_trials(uri: str, sweep_id: str) -> list[dict]:
    from farm.store import tracking

    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = tracking.client(uri).download_artifacts(sweep_id, "sweep/trials.json", tmp)
        except Exception:  # a sweep stored without its trial list: only what ran is known
            return []
        return json.loads(Path(path).read_text())


def running_trials(address: str | None, sweep_id: str) -> dict[str, str]:
    """Trial id -> actor name, for the alive actors of the sweep's namespace (Ray's State API)."""
    from ray.util.state import list_actors  # Ray only when asked: MLflow alone answers without it

    out = {}
    filters = [("state", "=", "ALIVE"), ("ray_namespace", "=", sweep_namespace(sweep_id))]
    for actor in list_actors(address=address, filters=filters, detail=True, limit=10_000, raise_on_missing_output=False):
        if actor.repr_name:  # empty until the actor's __init__ ran
            out[actor.repr_name] = actor.name or ""
    return out


def sweep_status(uri: str, sweep_id: str | None = None, *, address: str | None = None) -> SweepStatus:
    from farm.store import tracking
    from farm.analysis.results import Status

    sweep_id = sweep_id or latest_sweep(uri)
    run = tracking.get_sweep(uri, sweep_id)
    if run is None:
        raise UserError(f"no sweep with id '{sweep_id}' in {uri}", key=KEY)
    tags = run.data.tags
    out = SweepStatus(sweep_id=sweep_id, name=run.info.run_name or "", status=tags.get(tracking.STATUS_TAG, "?"),
                      tracking_uri=uri)
    latest: dict[str, object] = {}
    for child in sorted(tracking.trial_runs(uri, sweep_id), key=lambda r: r.info.start_time or 0):
        latest[child.data.tags.get(tracking.TRIAL_TAG, "")] = child
    listed = _all_trials(uri, sweep_id)
    labels = {t["id"]: t.get("name") or t["id"] for t in listed}
    for trial_id in latest:
        labels.setdefault(trial_id, trial_id)

    running: dict[str, str] = {}
    if out.status == "running":
        if address:
            try:
                running = running_trials(address, sweep_id)
                out.ray_checked = True
            except Exception as exc:  # Ray is optional here: MLflow alone still answers
                out.ray_note = f"Ray at {address} not asked ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
        else:
            out.ray_note = "running trials are counted as pending without --address (the Ray dashboard or 'auto')"
    finished = {s.value for s in tracking_finished()}
    for trial_id, label in labels.items():
        child = latest.get(trial_id)
        status = child.data.tags.get(tracking.STATUS_TAG) if child is not None else None
        if status is not None and status in finished:
            state = "done" if status == Status.ok.value else "failed"
            detail = child.data.tags.get("farm.reason", "")[:200] if state == "failed" else ""
            out.trials.append(TrialState(trial_id, label, state, status, detail))
        elif trial_id in running:
            out.trials.append(TrialState(trial_id, label, "running", status, running[trial_id]))
        else:
            out.trials.append(TrialState(trial_id, label, "pending", status,
                                         f"last attempt: {status}" if status else ""))
    return out


def tracking_finished():
    from farm.analysis.outcome import FINISHED

    return FINISHED


def render(st: SweepStatus) -> str:
    c = st.counts()
    lines = [f"sweep {st.sweep_id} ({st.name}): {st.status}",
             f"trials: {len(st.trials)} - {c['done']} done, {c['failed']} failed, {c['running']} running, "
             f"{c['pending']} pending"]
    if st.ray_note:
        lines.append(f"note: {st.ray_note}")
    order = {s: i for i, s in enumerate(("running", "failed", "pending", "done"))}
    for t in sorted(st.trials, key=lambda t: order[t.state]):
        extra = f"  {t.detail}" if t.detail else ""
        status = f" ({t.status})" if t.status and t.state != "pending" else ""
        lines.append(f"  {t.state:<8} {t.label}{status}{extra}")
    return "\n".join(lines)
