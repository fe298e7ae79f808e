"""MLflow's basic-auth app, as farm meets it: what a server answers this client's login (`farm
sweep`'s check before anything starts, farm/run/preflight.py), which credential MLflow's client
sends and where it came from, MLflow's own password policy for the admin account `farm server
--auth` creates, and the login check that server runs (farm/cli/server.py).

MLflow's own client and rules, so that farm agrees with what the server will do; the refusals'
words are the callers'. No secret leaves this module: a `Login` says where a credential came
from, never what it is.
"""

from __future__ import annotations

import configparser
from dataclasses import dataclass
from pathlib import Path

from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_TIMEOUT, MLFLOW_TRACKING_TOKEN
from mlflow.exceptions import MlflowException
from mlflow.utils import credentials as mlflow_credentials
from mlflow.utils.validation import _validate_password

API_PROBE = "/api/2.0/mlflow/experiments/search"  # the cheapest call every MLflow server answers
CREDENTIALS_FILE = "~/.mlflow/credentials"
USER_VAR, PASSWORD_VAR, TOKEN_VAR = "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", MLFLOW_TRACKING_TOKEN.name


@dataclass(frozen=True)
class Login:
    """The credential MLflow's client sends a server, and where each part of it came from (a
    variable's name or ~/.mlflow/credentials), never its value. MLflow sends HTTP basic auth when
    it has a user and a password, else a bearer token when it has one, else nothing."""

    user: str | None
    user_from: str | None
    password_from: str | None
    token_from: str | None

    @property
    def sends(self) -> str:
        """"basic", "token" or "none", as MLflow's client decides (mlflow.utils.rest_utils.http_request)."""
        if self.user_from and self.password_from:
            return "basic"
        return "token" if self.token_from else "none"


class CredentialsFileError(Exception):
    """~/.mlflow/credentials cannot be read as MLflow reads it (configparser with %-interpolation):
    MLflow's client would fail on every request. `option`: the key that failed where known,
    `line`: its line where known; the file's text is never kept (it holds a password)."""

    def __init__(self, why: str, *, option: str | None = None, line: int | None = None):
        super().__init__(why)
        self.why, self.option, self.line = why, option, line


def client_login() -> Login:
    """Which credential MLflow's client sends, as `mlflow.utils.credentials.read_mlflow_creds`
    reads it: each of MLFLOW_TRACKING_USERNAME and _PASSWORD from its variable when set and not
    empty, else from ~/.mlflow/credentials; MLFLOW_TRACKING_TOKEN. Raises CredentialsFileError
    where MLflow's own reading of the file would raise."""
    try:
        user_file, password_file = mlflow_credentials._read_mlflow_creds_from_file()
    except configparser.InterpolationError as exc:
        raise CredentialsFileError("interpolation", option=exc.option) from None
    except configparser.ParsingError as exc:  # MissingSectionHeaderError among them
        errors = getattr(exc, "errors", None)
        line = errors[0][0] if errors else getattr(exc, "lineno", None)
        raise CredentialsFileError("syntax", line=line) from None
    except (configparser.DuplicateOptionError, configparser.DuplicateSectionError) as exc:
        raise CredentialsFileError("duplicate", option=getattr(exc, "option", None), line=exc.lineno) from None
    except configparser.Error:
        raise CredentialsFileError("syntax") from None
    except UnicodeDecodeError:
        raise CredentialsFileError("encoding") from None
    except OSError as exc:
        raise CredentialsFileError(f"unreadable: {exc.strerror or type(exc).__name__}") from None
    user_env, password_env = mlflow_credentials._read_mlflow_creds_from_env()
    return Login(user=user_env or user_file,
                 user_from=USER_VAR if user_env else CREDENTIALS_FILE if user_file else None,
                 password_from=PASSWORD_VAR if password_env else CREDENTIALS_FILE if password_file else None,
                 token_from=TOKEN_VAR if MLFLOW_TRACKING_TOKEN.get() else None)


TIMEOUT_VAR = MLFLOW_HTTP_REQUEST_TIMEOUT.name


def client_timeout_s() -> int | None:
    """How long MLflow's client waits for one answer (MLFLOW_HTTP_REQUEST_TIMEOUT, MLflow's default
    when unset); None when the variable holds no whole number of seconds above 0 (MLflow's client
    would raise on it at its first request)."""
    try:
        seconds = MLFLOW_HTTP_REQUEST_TIMEOUT.get()
    except ValueError:
        return None
    return seconds if seconds > 0 else None


def _request(uri: str, endpoint: str, method: str, timeout_s: float, **kwargs):
    """One call to the server at `uri`, sent by MLflow's own HTTP client with the credentials MLflow
    reads, once: no retry (MLflow's client retries a 5xx for minutes, which is what a sweep would
    do), any status returned as it came. The `requests` response, or the `MlflowException` MLflow
    raised where no answer came (returned, not raised: each caller reads it its own way; reading
    the credentials raises as in MLflow)."""
    from mlflow.utils.rest_utils import http_request

    creds = mlflow_credentials.get_default_host_creds(uri)
    try:
        return http_request(creds, endpoint, method, max_retries=0, backoff_factor=0, retry_codes=(),
                            timeout=timeout_s, raise_on_status=False, **kwargs)
    except MlflowException as exc:
        return exc


@dataclass(frozen=True)
class ApiAnswer:
    """What a server answered one API call carrying this client's credential: an HTTP status and
    the scheme its 401 asks for (WWW-Authenticate: "basic" from MLflow's auth app), or, with no
    status, `failure`: "timeout" or why no answer came."""

    status: int | None
    challenge: str | None = None
    failure: str | None = None


def api_answer(uri: str, timeout_s: float) -> ApiAnswer:
    """One API call to the server at `uri`, sent by MLflow's own HTTP client with the credentials
    MLflow reads (call `client_login` first: a damaged credentials file raises here as in MLflow),
    once: no retry (MLflow's client retries a 5xx for minutes, which is what a sweep would do)."""
    import requests

    response = _request(uri, API_PROBE, "GET", timeout_s, params={"max_results": 1})
    if isinstance(response, MlflowException):
        # MLflow wraps what requests raised; a read timeout comes as requests' ConnectionError over
        # urllib3's, over the socket's TimeoutError
        exc = response
        chain, cause = [], exc.__cause__ or exc.__context__
        while cause is not None and len(chain) < 20:
            chain.append(cause)
            cause = cause.__cause__ or cause.__context__
        if any(isinstance(e, (requests.exceptions.Timeout, TimeoutError)) or "ReadTimeout" in type(e).__name__
               for e in chain):
            return ApiAnswer(None, failure="timeout")
        return ApiAnswer(None, failure=type(chain[-1] if chain else exc).__name__)
    scheme = response.headers.get("WWW-Authenticate", "").split(" ", 1)[0].lower() or None
    return ApiAnswer(response.status_code, challenge=scheme)


# A run that cannot be made: the server checks the permission to write to the experiment first (its
# auth app's before-request hook), then the request, whose start time is no number: 400, nothing
# written. So a 400 says "may write" and a 403 "may not", without a run made either way.
WRITE_PROBE = "/api/2.0/mlflow/runs/create"
NOT_A_TIME = "not-a-time"


@dataclass(frozen=True)
class Access:
    """What this client's login may do with the experiment a sweep writes to, as the server
    answered (HTTP statuses; None where no call was made or no answer came): `read` of the
    experiment (by name) or of the sweep's run (on a resume), `write` of a run into it."""

    read: int | None
    write: int | None = None
    experiment_id: str | None = None


def _call(uri: str, endpoint: str, method: str, timeout_s: float, **kwargs):
    """The server's answer, or None where none came: the login probe before this one says why, or the sweep will."""
    response = _request(uri, endpoint, method, timeout_s, **kwargs)
    return None if isinstance(response, MlflowException) else response


def experiment_access(uri: str, timeout_s: float, *, experiment: str | None = None,
                      sweep_id: str | None = None) -> Access:
    """May this client read the experiment named `experiment` (or the run `sweep_id`, whose
    experiment a resume writes to), and write runs into it? Calls MLflow's API with MLflow's own
    client and credentials and writes nothing: an experiment not there yet (404) is made by the
    sweep, which every user of MLflow's auth app may do."""
    if sweep_id is not None:
        got = _call(uri, "/api/2.0/mlflow/runs/get", "GET", timeout_s, params={"run_id": sweep_id})
        key = ("run", "info", "experiment_id")
    else:
        got = _call(uri, "/api/2.0/mlflow/experiments/get-by-name", "GET", timeout_s,
                    params={"experiment_name": experiment})
        key = ("experiment", "experiment_id")
    if got is None or got.status_code != 200:
        return Access(read=None if got is None else got.status_code)
    try:
        found = got.json()
        for part in key:
            found = found[part]
        experiment_id = str(found)
    except (ValueError, KeyError, TypeError):
        return Access(read=200)
    wrote = _call(uri, WRITE_PROBE, "POST", timeout_s, json={"experiment_id": experiment_id, "start_time": NOT_A_TIME})
    return Access(read=200, write=None if wrote is None else wrote.status_code, experiment_id=experiment_id)


def password_refusal(password: str) -> str | None:
    """Why MLflow's password policy refuses `password` (its own words), or None."""
    try:
        _validate_password(password)
    except MlflowException as exc:
        return exc.message
    return None


def stored_password_differs(db: Path, user: str, password: str) -> bool:
    """Whether the auth database `db` of MLflow's basic-auth app (one `farm server --auth` made
    before) holds `user` with another password. MLflow sets an admin's password only when it
    creates the account, so a server restarted with a changed password would start and then
    refuse it. Read-only, with the check MLflow's store makes (werkzeug's password hash); a
    database that is not there, or not yet one of MLflow's, differs in nothing."""
    import sqlite3

    from werkzeug.security import check_password_hash

    if not db.is_file():
        return False
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            row = con.execute("SELECT password_hash FROM users WHERE username = ?", (user,)).fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return False  # MLflow's own start says what is wrong with its database
    return row is not None and not check_password_hash(row[0], password)


def authenticate_basic_only():
    """The login check of `farm server --auth` (its `authorization_function`), run inside the
    MLflow server: MLflow's own basic-auth check for a request with HTTP basic credentials, and
    MLflow's own 401 (WWW-Authenticate: Basic) for any other Authorization header. MLflow 3.17's
    check, with its login cache on, hashes the absent password of a bearer token (what MLflow's
    client sends for MLFLOW_TRACKING_TOKEN) and answers HTTP 500, which clients retry for minutes."""
    from flask import request
    from mlflow.server.auth import authenticate_request_basic_auth, make_basic_auth_response

    given = request.authorization
    if given is None or given.type != "basic" or given.username is None or given.password is None:
        return make_basic_auth_response()
    return authenticate_request_basic_auth()
