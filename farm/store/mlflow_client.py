"""The one way farm opens MLflow: a client for a tracking URI, and the URI used where none is given
(`farm.store.tracking` re-exports both, where callers import them)."""

from __future__ import annotations

from pathlib import Path

from mlflow.tracking import MlflowClient

from farm.inputs import env_tracking_uri


def default_tracking_uri() -> str:
    """MLflow's own default: a SQLite store in the working directory, no server needed
    (MLFLOW_TRACKING_URI first, checked where farm reads its inputs)."""
    return env_tracking_uri() or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def client(uri: str) -> MlflowClient:
    return MlflowClient(tracking_uri=uri)
