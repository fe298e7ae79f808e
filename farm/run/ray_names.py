"""What a sweep's actors are called in Ray: the sweep's namespace, and each trial actor's name.

Every actor of a sweep lives in the namespace `farm-<sweep id>`, so that `farm status` (and an
operator with `ray list actors --filter ray_namespace=...`) finds a sweep's trials by asking Ray
for that namespace, never by reading names apart. The name is for people, in the dashboard.
"""

from __future__ import annotations

from farm.study.trial import Trial

NAMESPACE_PREFIX = "farm-"


def sweep_namespace(sweep_id: str) -> str:
    return f"{NAMESPACE_PREFIX}{sweep_id}"


def actor_name(sweep_id: str, trial: Trial, attempt: int) -> str:
    """Readable in the Ray dashboard: engine, short id, what differs, sweep, attempt."""
    differs = ",".join(f"{k}={v}" for k, v in trial.flags.items() if not isinstance(v, (dict, list)))[:60]
    label = trial.name or differs or "default"
    return f"{trial.engine}:{trial.id.split('-')[-1]}:{label}:{sweep_id[:8]}:a{attempt}"
