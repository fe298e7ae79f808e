"""MLflow's basic-auth app, as farm meets it: whether a server accepts this client's login
(`farm sweep`'s check before anything starts, farm/run/preflight.py) and MLflow's own password
policy for the admin account `farm server --auth` creates (farm/cli/server.py).

MLflow's own client and rules, so that farm agrees with what the server will do; the refusals'
words are the callers'.
"""

from __future__ import annotations

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from mlflow.utils.credentials import read_mlflow_creds
from mlflow.utils.validation import _validate_password


def api_refusal(uri: str) -> int | None:
    """The HTTP status a server answers this client's first API call with when it refuses it (401:
    no or wrong login, 403: not allowed), None when it answers. MLflow's own client sends the
    credentials, from wherever MLflow reads them; a server it cannot reach raises as MLflow does."""
    try:
        MlflowClient(uri).search_experiments(max_results=1)
    except MlflowException as exc:
        return exc.get_http_status_code()
    return None


def login_user() -> str | None:
    """The user MLflow logs in as: MLFLOW_TRACKING_USERNAME or ~/.mlflow/credentials."""
    return read_mlflow_creds().username


def password_refusal(password: str) -> str | None:
    """Why MLflow's password policy refuses `password` (its own words), or None."""
    try:
        _validate_password(password)
    except MlflowException as exc:
        return exc.message
    return None
