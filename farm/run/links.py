"""Links a user opens: a sweep's run in the MLflow UI."""

from __future__ import annotations

# `mlflow ui`'s default address, where a local store (sqlite:///...) opens.
MLFLOW_UI_DEFAULT = "http://127.0.0.1:5000"


def _ui(uri: str) -> str:
    """The MLflow UI of a store: a tracking server's own, a local store's under `mlflow ui`'s default address."""
    return uri.rstrip("/") if uri.startswith(("http://", "https://")) else MLFLOW_UI_DEFAULT


def mlflow_run_link(uri: str, experiment_id: str, run_id: str) -> str:
    """Where the sweep's run opens in the MLflow UI."""
    # MLflow 3's UI shows an experiment as GenAI (traces) or model training (runs) by this parameter,
    # else by the browser's last choice, GenAI at first: its experiment-kind tag does not decide it
    return f"{_ui(uri)}/#/experiments/{experiment_id}/runs/{run_id}?{ML_VIEW}"


def mlflow_trials_link(uri: str, experiment_id: str, sweep_id: str) -> str:
    """Where the sweep's trials open as a table: the experiment's runs filtered to the sweep's trials,
    their throughput, TTFT and TPOT as columns, best first (the view farm stores beside the sweep:
    farm/store/schema.py trials_view; MLflow 3's UI opens a stored view by `viewStateShareKey`)."""
    return f"{_ui(uri)}/#/experiments/{experiment_id}/runs?{VIEW_KEY}={sweep_id}&{ML_VIEW}"


# MLflow 3's UI: the shared view of the runs table that a link opens (read with no other search
# parameter: a `searchFilter` or `orderByKey` in the URL overrides the whole view).
VIEW_KEY = "viewStateShareKey"
# The model-training view of MLflow 3's UI: an experiment opens on its runs.
ML_VIEW = "workflowType=machine_learning"
