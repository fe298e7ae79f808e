"""`farm status`: where a sweep stands, from MLflow (what finished) and Ray (what runs now).

The store (`farm.store.mlflow_store.MlflowStore`) lists the sweep's trials and how each ended;
a running trial is an alive actor in the sweep's Ray namespace
(`farm.run.ray_names.sweep_namespace`), which reports its trial id as its `repr_name`
(`actors.bench.BenchActor.__repr__`). The rest are pending.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from farm.analysis.results import Status
from farm.errors import UserError
from farm.store.mlflow_store import MlflowStore
from farm.store.schema import SWEEP_INTERRUPTED, SWEEP_RUNNING
from farm.run.ray_names import sweep_namespace

STATES = ("done", "failed", "not measurable", "same server", "running", "pending")
KEY = "SWEEP_ID"
# A finished trial's state by its status; any other status is a failure.
FINISHED_STATES = {Status.ok.value: "done", Status.not_measurable.value: "not measurable",
                   Status.same_server.value: "same server"}


@dataclass
class TrialState:
    id: str
    label: str
    state: str  # done | failed | not measurable (never started: farm/analysis/outcome.py) | same server (another
    # trial's server: farm/analysis/twins.py) | running | pending
    status: str | None = None  # farm's result status of a finished trial
    detail: str = ""


@dataclass
class SweepStatus:
    sweep_id: str
    name: str
    status: str  # the sweep's own: running, finished, killed, interrupted, failed
    tracking_uri: str
    trials: list[TrialState] = field(default_factory=list)
    ray_checked: bool = False
    ray_note: str = ""
    interrupted: str | None = None  # why farm knows its driver is gone (tracking.interruption)
    resume: str | None = None  # the command that resumes a sweep that ended before its end


    def counts(self) -> dict[str, int]:
        return {s: sum(1 for t in self.trials if t.state == s) for s in STATES}

    def as_dict(self) -> dict:
        return {"sweep_id": self.sweep_id, "name": self.name, "status": self.status, "tracking_uri": self.tracking_uri,
                "counts": self.counts(), "ray_checked": self.ray_checked, "interrupted": self.interrupted,
                "resume": self.resume, "trials": [t.__dict__ for t in self.trials]}


def running_trials(address: str | None, sweep_id: str) -> dict[str, str]:
    """Trial id -> actor name, for the alive actors of the sweep's namespace (Ray's State API)."""
    from ray.util.state import list_actors  # Ray only when --address asks it: `farm status` stays quick without

    out = {}
    filters = [("state", "=", "ALIVE"), ("ray_namespace", "=", sweep_namespace(sweep_id))]
    for actor in list_actors(address=address, filters=filters, detail=True, limit=10_000, raise_on_missing_output=False):
        if actor.repr_name:  # empty until the actor's __init__ ran
            out[actor.repr_name] = actor.name or ""
    return out


def sweep_status(uri: str, sweep_id: str | None = None, *, address: str | None = None,
                 tracking_key: str = "--tracking-uri") -> SweepStatus:
    store = MlflowStore(uri, key=tracking_key)
    sweep_id = sweep_id or store.latest_sweep()
    info = store.sweep(sweep_id)
    if info is None:
        raise UserError(f"no sweep with id '{sweep_id}' in {uri}", key=KEY)
    out = SweepStatus(sweep_id=sweep_id, name=info.name, status=info.status, tracking_uri=uri,
                      interrupted=info.interrupted)
    if info.status in (SWEEP_INTERRUPTED, "killed") and info.command:
        from farm.run.sweep_view import resume_command

        out.resume = resume_command(info.command, sweep_id)
    running: dict[str, str] = {}
    if out.status == SWEEP_RUNNING:
        if address:
            try:
                running = running_trials(address, sweep_id)
                out.ray_checked = True
            except Exception as exc:  # Ray is optional here: MLflow alone still answers
                out.ray_note = f"Ray at {address} not asked ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
        else:
            out.ray_note = "running trials are counted as pending without --address (the Ray dashboard or 'auto')"
    for trial in store.trials(sweep_id):
        if trial.finished:
            state = FINISHED_STATES.get(trial.status, "failed")
            detail = (trial.reason or "")[:200] if state != "done" else ""
            out.trials.append(TrialState(trial.id, trial.label, state, trial.status, detail))
        elif trial.id in running:
            out.trials.append(TrialState(trial.id, trial.label, "running", trial.status, running[trial.id]))
        else:
            out.trials.append(TrialState(trial.id, trial.label, "pending", trial.status,
                                         f"last attempt: {trial.status}" if trial.status else ""))
    return out


def render(st: SweepStatus) -> str:
    c = st.counts()
    lines = [f"sweep {st.sweep_id} ({st.name}): {st.status}",
             f"trials: {len(st.trials)} - {c['done']} done, {c['failed']} failed, "
             + (f"{c['not measurable']} not measurable, " if c["not measurable"] else "")
             + (f"{c['same server']} the same server as another, " if c["same server"] else "")
             + f"{c['running']} running, {c['pending']} pending"]
    if st.interrupted:
        lines.append(f"interrupted: {st.interrupted}")
    if st.resume:
        lines.append(f"resume with: {st.resume}")
    if st.ray_note:
        lines.append(f"note: {st.ray_note}")
    order = {s: i for i, s in enumerate(("running", "failed", "not measurable", "same server", "pending", "done"))}
    for t in sorted(st.trials, key=lambda t: order[t.state]):
        extra = f"  {t.detail}" if t.detail else ""
        status = f" ({t.status})" if t.status and t.state != "pending" else ""
        lines.append(f"  {t.state:<8} {t.label}{status}{extra}")
    return "\n".join(lines)
