"""What a sweep's actors are called in Ray: the sweep's namespace, and each trial actor's name.

Every actor of a sweep lives in the namespace `farm-<sweep id>`, so that `farm status` (and an
operator with `ray list actors --filter ray_namespace=...`) finds a sweep's trials by asking Ray
for that namespace, never by reading names apart. The name is for people, in the dashboard.
"""

from __future__ import annotations

from typing import Iterable

from farm.engines import get_engine
from farm.secrets import redact_flags
from farm.study.trial import Trial

LABEL_MAX_CHARS = 160  # the short id tells trials apart; the label says how, up to what a column shows on hover

NAMESPACE_PREFIX = "farm-"


def sweep_namespace(sweep_id: str) -> str:
    return f"{NAMESPACE_PREFIX}{sweep_id}"


def _pairs(values: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in values.items() if not isinstance(v, (dict, list)))


def actor_name(sweep_id: str, trial: Trial, attempt: int, secret_flags: Iterable[str] | None = None) -> str:
    """Readable in the Ray dashboard: engine, short id, what differs (the trial's name as MLflow
    and the report show it, farm/study/names.py; without one its engine-neutral knobs, else its
    flags, secret values masked), sweep, attempt: `mock:dd59a71a:ttft-ms=50 itl-ms=10:1a2b3c4d:a1`."""
    secret = get_engine(trial.engine).secret_flag_names if secret_flags is None else secret_flags
    differs = _pairs(trial.knobs) if trial.knobs else _pairs(redact_flags(trial.flags, secret))
    label = trial.name or differs or "default"
    return f"{trial.engine}:{trial.id.split('-')[-1]}:{label[:LABEL_MAX_CHARS]}:{sweep_id[:8]}:a{attempt}"
