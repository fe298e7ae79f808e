"""Checks of a sweep's inputs that need the outside world, made before Ray starts or MLflow is written.

The study itself is validated when it is read (farm/study/load.py, farm/study/spec.py: pure). What remains is what the study and the
command line point at: the benchmark datasets (when the sweep runs here), the tracking store,
the Ray cluster, and the sweep to resume. Each failure is one `UserError` line naming the
file or option, the key and the reason; nothing is started and nothing is written.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from textwrap import shorten
from urllib.parse import urlparse

from farm.analysis.results import TrialResult
from farm.analysis.quality_runs import QualityJob
from farm.analysis.quality_verdicts import study_job
from farm.errors import UserError
from farm.inputs import (RAY_TOKEN_MISSING, address_host_port, env_directory, ray_token_source,
                         tracking_uri as read_tracking_uri)
from farm.store import auth
from farm.store.base import finished_trial_ids
from farm.store.location import sqlite_path
from farm.store.mlflow_store import MlflowStore
from farm.study.spec import Study
from farm.study.trial import Trial, trial_id

PROBE_TIMEOUT_S = 3.0
STORE_LOCK_WAIT_S = 5.0  # how long a read waits for another process's write lock on a SQLite store


def check_datasets(study: Study, trials: list[Trial]) -> None:
    """Every dataset file the trials' profiles read exists here (for a sweep on this machine;
    on a cluster the files live on the nodes, and a trial whose node lacks one fails as
    `dataset_missing`)."""
    used = dict.fromkeys(p for t in trials for p in t.profiles)
    for name in used:
        path = study.profiles[name].data.resolved_path()
        if path is not None and not path.is_file():
            why = "is a directory, not a file" if path.is_dir() else "does not exist"
            unset = sorted(set(re.findall(r"\$\{?(\w+)\}?", str(path))))
            if unset:
                why += f" ({', '.join(unset)} not set)"
            raise UserError(f"dataset file {path} {why}", file=study.source, key=f"profiles.{name}.data.path")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"no answer within {PROBE_TIMEOUT_S:g} s"
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def check_tracking_uri(uri: str, *, key: str = "--tracking-uri", to_write: bool = True) -> None:
    """The MLflow store can be reached (a server answers) or created (its directory exists); its
    form (sqlite:///PATH or http(s)://) was checked by `farm.inputs`. `key`: where the URI came
    from (`farm.inputs.tracking_source`: the option, MLFLOW_TRACKING_URI or the default).
    `to_write=False`: a command that only reads (a store on read-only media is fine)."""
    read_tracking_uri(uri, option=key)  # the forms farm takes (a URI from a caller other than the CLI, too)
    db = sqlite_path(uri)
    if uri.startswith("sqlite:"):
        if db is None:
            raise UserError(f"'{uri}' names no database file (expected sqlite:///PATH)", key=key)
        folder = db.parent if str(db.parent) else Path(".")
        if not folder.is_dir():
            # MLflow makes the database file, never its directory; a file on the path is a typo to name
            on_path = next((p for p in (folder, *folder.parents) if p.exists()), None)
            if on_path is not None and not on_path.is_dir():
                raise UserError(f"the SQLite store {db} cannot be made: {on_path} on its path is a file, not a "
                                f"directory", key=key)
            raise UserError(f"the directory of the SQLite store does not exist: {folder}", key=key)
        if db.exists() and not db.is_file():
            raise UserError(f"the SQLite store {db} is not a file", key=key)
        if db.is_file() and db.stat().st_size and not _is_sqlite(db):
            raise UserError(f"{db} is not a SQLite database", key=key)
        if to_write and not os.access(folder if not db.exists() else db, os.W_OK):
            raise UserError(f"the SQLite store is not writable: {db if db.exists() else folder}", key=key)
        return
    parsed = urlparse(uri)
    if parsed.scheme in ("http", "https"):
        import httpx  # only for a server URI

        try:
            httpx.get(uri.rstrip("/") + "/health", timeout=PROBE_TIMEOUT_S)
        except httpx.HTTPError as exc:
            cause = exc.__cause__ or exc.__context__ or exc
            while cause.__cause__ is not None or cause.__context__ is not None:
                cause = cause.__cause__ or cause.__context__
            raise UserError(f"cannot reach the MLflow server at {uri} ({_reason(cause)})", key=key) from None
        _check_server_login(uri, key)


def _check_server_login(uri: str, key: str) -> None:
    """The server answers MLflow's API with this client's credentials: found here, before a sweep
    starts, rather than as a 401 traceback from its first run or a 5xx its clients retry for
    minutes. A server behind MLflow's auth app answers /health to anyone, so one API call, sent by
    MLflow's own client with the credential MLflow reads; only a 2xx passes."""
    try:
        login = auth.client_login()
    except auth.CredentialsFileError as exc:
        raise UserError(_credentials_file_refusal(exc), file=auth.CREDENTIALS_FILE, key=exc.option) from None
    timeout_s = auth.client_timeout_s()
    if timeout_s is None:
        raise UserError("not a whole number of seconds above 0 (how long MLflow's client waits for each answer)",
                        key=auth.TIMEOUT_VAR)
    why = login_refusal(auth.api_answer(uri, min(timeout_s, LOGIN_TIMEOUT_S)), login, timeout_s=timeout_s)
    if why is not None:
        raise UserError(f"the MLflow server at {uri} {why}", key=key)


def check_experiment_access(uri: str, *, experiment: str | None, resume: str | None,
                            key: str = "--tracking-uri") -> None:
    """A server's login may be good and still not reach the sweep's experiment: MLflow's auth app
    gives each user the experiments an admin granted (and those the user made). Found here, in
    one line, before Ray or an engine starts, rather than as a 403 traceback from the driver's
    first write. Nothing is written (farm/store/auth.py: `experiment_access`)."""
    if urlparse(uri).scheme not in ("http", "https") or (experiment is None and resume is None):
        return
    timeout_s = min(auth.client_timeout_s() or LOGIN_TIMEOUT_S, LOGIN_TIMEOUT_S)
    access = auth.experiment_access(uri, timeout_s, experiment=None if resume else experiment, sweep_id=resume)
    who = _credential(auth.client_login())
    what = f"sweep {resume}" if resume else f"experiment {experiment!r}"
    grant = (f"an admin of the server grants the user EDIT on {'its experiment' if resume else 'it'}"
             + ("" if resume else ", or name another experiment (--experiment)"))
    if access.read == 403:
        gone = "it is not on this server, or " if resume else ""
        raise UserError(f"the MLflow server at {uri} refused {who} reading {what} (HTTP 403: {gone}the user has no "
                        f"permission on {'its experiment' if resume else 'it'}): {grant}", key=key)
    if access.write == 403:
        raise UserError(f"the MLflow server at {uri} lets {who} read {what} but not write runs to "
                        f"{'its experiment' if resume else 'it'} (HTTP 403): {grant}", key=key)


# One API call: a password hash (tens of ms) on a server a sweep may keep busy. At most what
# MLflow's client itself waits (MLFLOW_HTTP_REQUEST_TIMEOUT), for the sweep's calls wait no longer.
LOGIN_TIMEOUT_S = 30


def _credentials_file_refusal(exc: auth.CredentialsFileError) -> str:
    """Why MLflow's client cannot read ~/.mlflow/credentials (never a line of it: it holds a password)."""
    at = f" (line {exc.line})" if exc.line else ""
    if exc.why == "interpolation":
        return ("MLflow cannot read this value: it reads the file with %-interpolation, so a '%' in a password is "
                f"written '%%' there (or set {auth.PASSWORD_VAR}, which is read as it is)")
    if exc.why == "encoding":
        return "MLflow cannot read this file: it is not UTF-8"
    if exc.why == "duplicate":
        return f"MLflow cannot read this file: a key or section is given twice{at}"
    if exc.why == "syntax":
        return (f"MLflow cannot read this file{at}: it expects an [mlflow] section of "
                "'mlflow_tracking_username = ...' and 'mlflow_tracking_password = ...' lines")
    return f"MLflow cannot read this file: {exc.why}"


def _credential(login: auth.Login) -> str:
    """The credential a request carried, by where it came from (never its value)."""
    if login.sends == "basic":
        sources = dict.fromkeys((login.user_from, login.password_from))
        return f"the login of user {login.user!r} (from {' and '.join(sources)})"
    if login.sends == "token":
        return f"the token in {login.token_from}"
    return "no login"


def _half_login(login: auth.Login) -> str | None:
    """A user without a password or a password without a user: MLflow's client sends neither."""
    if login.user_from and not login.password_from:
        return (f"{login.user_from} names user {login.user!r} but no password is set: set "
                f"{auth.PASSWORD_VAR} (or {auth.CREDENTIALS_FILE})")
    if login.password_from and not login.user_from:
        return f"a password is set in {login.password_from} but no user: set {auth.USER_VAR} (or {auth.CREDENTIALS_FILE})"
    return None


def login_refusal(answer: auth.ApiAnswer, login: auth.Login, *, timeout_s: int = LOGIN_TIMEOUT_S) -> str | None:
    """Why a server's answer to one API call with `login` is no "reachable and authorised" (the
    words after "the MLflow server at URI"), or None for a 2xx. `timeout_s`: MLflow's client's
    own wait (MLFLOW_HTTP_REQUEST_TIMEOUT), of which the call waited at most LOGIN_TIMEOUT_S."""
    sent = _credential(login)
    if answer.status is None:
        if answer.failure == "timeout":
            waited = (f"{timeout_s} s ({auth.TIMEOUT_VAR})" if timeout_s < LOGIN_TIMEOUT_S
                      else f"{LOGIN_TIMEOUT_S} s")
            return (f"did not answer an API call within {waited}, sent with {sent}: it answers /health, so it is "
                    "up but busy or stuck; see its log")
        return f"answered /health but not an API call sent with {sent} ({answer.failure})"
    code = answer.status
    if 200 <= code < 300:
        return None
    if code == 401:
        half = _half_login(login) if login.sends != "basic" else None
        if half:
            return f"requires a login: {half}"
        if login.sends == "none":
            return (f"requires a login: set {auth.USER_VAR} and {auth.PASSWORD_VAR} (or {auth.CREDENTIALS_FILE})")
        if login.sends == "token":
            if answer.challenge == "basic":
                return (f"takes a user and password (HTTP basic auth, as MLflow's auth app does), not {sent}: set "
                        f"{auth.USER_VAR} and {auth.PASSWORD_VAR}")
            return f"rejected {sent} (HTTP 401)"
        colon = ": a ':' in a user name cannot pass HTTP basic auth" if ":" in (login.user or "") else \
            ": wrong user or password"
        return f"rejected {sent}{colon}"
    if code == 403:
        who = f"user {login.user!r} (from {login.user_from})" if login.sends == "basic" else sent
        return f"refused {who} (HTTP 403): it may not read experiments; an admin of the server grants permissions"
    if code >= 500:
        hint = ""
        if login.sends == "token":
            # MLflow 3.17's basic-auth app with its login cache on answers a bearer token so
            hint = (f"; MLflow's auth app answers a token so when its login cache is on: it takes "
                    f"{auth.USER_VAR} and {auth.PASSWORD_VAR}, not a token")
        return f"answered HTTP {code} to an API call with {sent}{hint}; see the server's log"
    return (f"answered HTTP {code} to an API call ({auth.API_PROBE}) with {sent}: is it an MLflow "
            "tracking server?")


def check_store_to_read(uri: str, *, key: str = "--tracking-uri") -> None:
    """A store that commands only read (report, status): reachable, and, for SQLite, already
    there (opening a missing one would create an empty store and then say "no sweep"), and not
    damaged. Writable or not: it is only read (`farm.store.tracking.client` opens a SQLite store
    that cannot be written read-only)."""
    check_tracking_uri(uri, key=key, to_write=False)
    db = sqlite_path(uri)
    if db is not None and not db.is_file():
        raise UserError(f"there is no tracking store at {db}", key=key)
    if db is not None:
        _check_mlflow_tables(db, key)


def _check_mlflow_tables(db: Path, key: str) -> None:
    """A SQLite file a command only reads must already be an MLflow store: opened by MLflow, any
    other database (or an empty file) would get MLflow's schema written into it. Read-only here."""
    import sqlite3

    if db.stat().st_size == 0:
        raise UserError(f"{db} is an empty file, not an MLflow store (a sweep writes one)", key=key)
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=STORE_LOCK_WAIT_S)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            # every page, not only the schema's: a store damaged in its runs' pages reads as one
            # without the sweep (MLflow's lookups fail and are taken for an unknown id)
            problems = [r[0] for r in con.execute("PRAGMA quick_check(3)")]
        finally:
            con.close()
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorname", "") not in ("SQLITE_BUSY", "SQLITE_LOCKED"):
            raise UserError(f"{db} cannot be read ({exc})", key=key) from None
        # another process holds the store's write lock: a writer's transaction lasts milliseconds,
        # so one that outlasts the wait is held on purpose (a tool, a hung process), not damage
        raise UserError(f"{db} is locked by another process, which held its write lock for {STORE_LOCK_WAIT_S:g} s: "
                        f"try again once that process is done (nothing was read or written)", key=key) from None
    except sqlite3.DatabaseError as exc:
        raise UserError(f"{db} is damaged: it cannot be read as a SQLite database ({exc}); restore it from a copy",
                        key=key) from None
    if problems != ["ok"]:
        raise UserError(f"{db} is damaged: SQLite's check found {shorten(problems[0], 120)!r}"
                        f"{' and more' if len(problems) > 1 else ''}; restore it from a copy", key=key)
    missing = {"experiments", "runs", "alembic_version"} - tables
    if missing:
        raise UserError(f"{db} is not an MLflow store (no {', '.join(sorted(missing))} table): farm reads the stores "
                        f"its sweeps write", key=key)


def stored_sweep_results(uri: str, sweep_id: str) -> list[TrialResult]:
    """Every trial result of a stored sweep, for the scripts that measure one (bench/, scripts/h200/):
    the store must be there and hold the sweep, else a one-line UserError."""
    check_store_to_read(uri)
    store = MlflowStore(uri)
    if store.sweep(sweep_id) is None:
        raise UserError(f"no sweep with id '{sweep_id}' in {uri}", key="SWEEP_ID")
    return store.results(sweep_id)


def _tcp_probe(host: str, port: int) -> None:
    with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
        pass


# What `ray_auth_probe` runs in a child python: one request to the cluster through Ray's own
# clients, with this process's token mode and token, answering one word on stdout. A child, for
# Ray's token loader aborts its whole process (a C++ check) on some token states, and a GCS client
# waits up to 40 s on a port that is no GCS: neither may take farm with it.
_AUTH_PROBE = """
import sys
address = sys.argv[1]
try:
    if address.startswith("ray://"):
        import grpc
        from ray._private.grpc_utils import init_grpc_channel  # adds the token in token mode
        from ray.core.generated import ray_client_pb2, ray_client_pb2_grpc
        channel = init_grpc_channel(address[len("ray://"):], asynchronous=False)
        request = ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING)
        try:
            ray_client_pb2_grpc.RayletDriverStub(channel).ClusterInfo(request, timeout=float(sys.argv[2]))
        except grpc.RpcError as exc:
            print("unauthenticated" if exc.code() == grpc.StatusCode.UNAUTHENTICATED else "other")
        else:
            print("ok")
    else:
        from ray._raylet import GcsClient
        from ray.exceptions import AuthenticationError
        try:
            GcsClient(address=address)
        except AuthenticationError:
            print("unauthenticated")
        else:
            print("ok")
except Exception:
    print("other")
"""
AUTH_PROBE_TIMEOUT_S = 15.0  # a python start and Ray's imports (about a second) and one request


def ray_auth_probe(address: str) -> str:
    """Whether the cluster at `address` (a GCS `HOST:PORT` or `ray://HOST:PORT`) takes this
    machine's token: "ok", "unauthenticated" (missing or wrong), or "unknown" (no answer in time,
    another error, or a probe that died: the sweep meets it as before)."""
    import subprocess
    import sys

    try:
        proc = subprocess.run([sys.executable, "-c", _AUTH_PROBE, address, f"{PROBE_TIMEOUT_S:g}"], capture_output=True,
                              text=True, timeout=AUTH_PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    word = proc.stdout.strip().splitlines()[-1:] if proc.returncode == 0 else []
    return word[0] if word and word[0] in ("ok", "unauthenticated") else "unknown"


def check_ray_token(address: str, *, key: str) -> None:
    """A cluster with token authentication takes this machine's token: found here, before anything
    starts, rather than as a traceback from `ray.init`. Which token is sent is Ray's business
    (`farm.run.jobs.enable_client_token` set the mode); only where it came from is named, never
    its value."""
    if ray_auth_probe(address) != "unauthenticated":
        return
    source = ray_token_source() if os.environ.get("RAY_AUTH_MODE", "").lower() == "token" else None
    if source is None:
        raise UserError(f"the Ray cluster at {address} {RAY_TOKEN_MISSING}", key=key)
    raise UserError(f"the Ray cluster at {address} rejected the token (from {source}): it is not this cluster's; "
                    f"copy it from the head (`ray get-auth-token` there)", key=key)


def check_ray_address(address: str, *, key: str = "--address") -> None:
    """Something listens where the address points (the GCS, a Ray client server, or a dashboard),
    and a GCS or Ray client server takes this machine's token. `key`: where the address came from
    (`--address` or `RAY_ADDRESS`)."""
    if address == "auto":
        try:
            from ray._private.services import canonicalize_bootstrap_address_or_die  # ray (seconds): only for 'auto'

            address = canonicalize_bootstrap_address_or_die("auto")
        except (ConnectionError, ImportError, ValueError) as exc:
            raise UserError(f"no running Ray cluster found on this machine for 'auto' ({_reason(exc)})", key=key) from None
    host, port = address_host_port(address)  # its form was checked where it was read (farm.inputs)
    try:
        _tcp_probe(host, port)
    except OSError as exc:
        raise UserError(f"cannot reach the Ray cluster at {address} ({_reason(exc)})", key=key) from None
    if urlparse(address).scheme not in ("http", "https"):  # the Jobs API's own client answers for its token
        check_ray_token(address, key=key)


@dataclass
class ResumePoint:
    """Where a resumed sweep continues."""

    sweep_id: str
    experiment_id: str
    finished: set[str]
    # today's trial id -> the sweep's own, for a sweep stored with ids of the older form
    renamed: dict[str, str] = field(default_factory=dict)

    def rename(self, trials: list[Trial]) -> list[Trial]:
        """The trials under the ids the sweep stored them with."""
        return [t.model_copy(update={"id": self.renamed[t.id]}) if t.id in self.renamed else t for t in trials]


def check_resume(uri: str, sweep_id: str, study: Study, grid: str, trials: list[Trial], *,
                 store_key: str = "--tracking-uri") -> ResumePoint:
    """The sweep exists in this store and is of this study and grid, with the same trials
    (`store_key`: where the store came from, named when it is damaged)."""
    key = "--resume"
    db = sqlite_path(uri)
    if db is not None and not db.is_file():
        # Opening a missing SQLite store would create it: say what is wrong instead.
        raise UserError(f"no sweep with id '{sweep_id}': there is no tracking store at {db}", key=key)
    if db is not None:  # a damaged store is named as such, not taken for one without the sweep
        _check_mlflow_tables(db, store_key)
    store = MlflowStore(uri)
    info = store.sweep(sweep_id)
    if info is None:
        raise UserError(f"no sweep with id '{sweep_id}' in {uri}", key=key)
    if info.study != study.name:
        raise UserError(f"sweep {sweep_id} is of study '{info.study}', not '{study.name}' "
                        f"({study.source})", key=key)
    if info.grid != grid:
        raise UserError(f"sweep {sweep_id} ran grid '{info.grid}', not '{grid}'", key=key)
    planned = store.planned_trials(sweep_id)
    renamed: dict[str, str] = {}
    if planned is not None:
        stored = {t.id for t in planned}
        renamed = _legacy_ids(planned, trials, stored)
        now = {renamed.get(t.id, t.id) for t in trials}
        added, gone = now - stored, stored - now
        if added or gone:
            raise UserError(f"grid '{grid}' of {study.source} no longer expands to the trials of sweep {sweep_id} "
                            f"({len(added)} new, {len(gone)} gone): the study changed since the sweep started; "
                            f"start a new sweep", key=key)
    return ResumePoint(sweep_id=sweep_id, experiment_id=info.experiment_id,
                       finished=finished_trial_ids(store, sweep_id), renamed=renamed)


def _legacy_ids(planned: list[Trial], trials: list[Trial], stored: set[str]) -> dict[str, str]:
    """Today's id -> the id a sweep stored for the same trial, where they differ: a sweep started
    before trial ids left out where a local model sits (its ids hold the model's absolute path on
    the machine it started on) is matched by what its trials are, and keeps its own ids."""
    today = {trial_id(t.engine, t.model, t.all_flags, t.weights): t.id
             for t in planned if t.node_control_of is None}
    return {t.id: today[t.id] for t in trials if t.id not in stored and t.id in today}


@dataclass(frozen=True)
class SweepChecks:
    """What the checks before a sweep read on their way, handed down so that nothing is read twice:
    the sweep to resume (None: a new sweep) and the quality gate's job (`study_job`; None: the study
    has no quality section, or the task was not read here, with --address, and the driver reads it)."""

    point: ResumePoint | None = None
    quality: QualityJob | None = None


def check_sweep(study: Study, trials: list[Trial], *, grid: str, address: str | None, tracking_uri: str,
                resume: str | None, tracking_key: str = "--tracking-uri",
                address_key: str = "--address", experiment: str | None = None) -> SweepChecks:
    """Everything a sweep needs from outside farm, checked before anything starts (`*_key`: where
    the tracking URI and the Ray address came from, as a refusal names them; `experiment`: the
    one a new sweep writes to, default the grid's)."""
    quality = None
    if address is None:
        check_datasets(study, trials)
        quality = study_job(study)  # the quality gate's task, read once, for the driver (a UserError names its line)
        env_directory("FARM_CACHE_DIR")  # tokenizers, datasets and warm-up markers are written there
    check_tracking_uri(tracking_uri, key=tracking_key)
    check_experiment_access(tracking_uri, experiment=experiment or study.grid_experiment(grid), resume=resume,
                            key=tracking_key)
    if address is not None:
        check_ray_address(address, key=address_key)
    point = check_resume(tracking_uri, resume, study, grid, trials, store_key=tracking_key) if resume else None
    return SweepChecks(point=point, quality=quality)
