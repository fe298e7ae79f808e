"""`farm server --auth` takes every password MLflow's policy takes, and a client's check before a
sweep (farm/run/preflight.py) tells "reachable and authorised" from every other answer, in one
line naming where the credential came from (issue 51, item 3). All real: `farm server --auth`
(and once a plain `mlflow server --app-name basic-auth`) started here, real HTTP, MLflow's own
client; the faults are real too (a token MLflow's auth app cannot take, its auth database locked
by another process so that the server answers 503 or not at all).

Before: a `%` in the admin password killed the server at start (the password went into an INI file
MLflow reads with %-interpolation), and a client holding only MLFLOW_TRACKING_TOKEN got HTTP 500
from the server's login cache, which the preflight took for "reachable": the sweep then retried
for minutes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from raynodes import free_ports, stop_group
from sweeptools import isolated_env, start_farm_server

pytestmark = pytest.mark.slow

USER = "farm-admin"
# every character class MLflow's INI reading choked on or might: both % forms, a doubled one
PASSWORD = "100% sure %(user)s %%pass"
SEARCH = "/api/2.0/mlflow/experiments/search?max_results=1"
FROM_VARS = f"the login of user '{USER}' (from MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD)"


def _files_hold(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cred-server")
    (port,) = free_ports(1)
    log = tmp / "server.log"
    store = tmp / "store 100%"  # a % in the store's path too: it is written into MLflow's auth config
    proc = start_farm_server(store, port, env=isolated_env(tmp, MLFLOW_TRACKING_USERNAME=USER,
                                                           MLFLOW_TRACKING_PASSWORD=PASSWORD), log=log, auth=True)
    try:
        yield {"uri": f"http://127.0.0.1:{port}", "store": store, "log": log, "proc": proc}
    finally:
        stop_group(proc)


def _farm(args: list[str], home: Path, timeout: float = 180, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm.cli", *args], cwd=home, env=isolated_env(home, **env),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _status(uri: str, home: Path, **env: str) -> subprocess.CompletedProcess:
    """`farm status` against the server: its preflight, then "no sweep" when the login passed."""
    return _farm(["status", "--tracking-uri", uri], home, **env)


def _one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return lines[0]


def test_a_password_with_percent_signs_starts_the_server_and_logs_in(server, tmp_path):
    uri = server["uri"]
    assert httpx.get(uri + SEARCH, auth=(USER, PASSWORD), timeout=120).status_code == 200
    ok = _status(uri, tmp_path, MLFLOW_TRACKING_USERNAME=USER, MLFLOW_TRACKING_PASSWORD=PASSWORD)
    assert _one_line(ok) == f"error: --tracking-uri: no sweep in {uri}"  # past the login: the store is empty
    wrong = _status(uri, tmp_path, MLFLOW_TRACKING_USERNAME=USER, MLFLOW_TRACKING_PASSWORD=PASSWORD + "x")
    assert _one_line(wrong) == (f"error: --tracking-uri: the MLflow server at {uri} rejected {FROM_VARS}: "
                                f"wrong user or password")
    # the password is nowhere on disk: not in MLflow's auth config (it reaches MLflow in its
    # MLFLOW_AUTH_ADMIN_* variables), not in the server's output
    assert not _files_hold(server["store"], PASSWORD) and PASSWORD not in server["log"].read_text()
    assert "admin_password" not in (server["store"] / "basic_auth.ini").read_text()


def test_a_restart_with_another_admin_password_is_refused_before_it_starts(server, tmp_path):
    """MLflow keeps the password an admin account was created with: a server restarted on the
    same store with another one would start and then refuse it, so farm says so first."""
    (port,) = free_ports(1)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in server["store"].iterdir())
    proc = _farm(["server", "--auth", "--store", str(server["store"]), "--port", str(port)], tmp_path, timeout=120,
                 MLFLOW_TRACKING_USERNAME=USER, MLFLOW_TRACKING_PASSWORD="a-new-password-2")
    assert _one_line(proc) == (f"error: --auth: MLFLOW_TRACKING_PASSWORD is not the password user '{USER}' has in "
                               f"{server['store'] / 'basic_auth.db'}: MLflow sets an admin's password only when it "
                               "creates the account; give that one, change it through MLflow's users/update-password "
                               "API, or start a new --store")
    assert "a-new-password-2" not in proc.stderr
    assert sorted((p.name, p.stat().st_mtime_ns) for p in server["store"].iterdir()) == before  # nothing written


@pytest.mark.parametrize("password", [
    'naïve "quoted" ключ 密码 ;# [x]',  # non-ASCII, quotes, INI comment and section characters
    "  spaces at both ends  ",  # an INI value would lose them
    "long-" + "x%" * 2500,  # a 5,005-character line
], ids=["non-ascii-and-quotes", "spaces", "long"])
def test_every_password_mlflow_takes_starts_the_server_and_logs_in(tmp_path, password):
    (port,) = free_ports(1)
    uri, log = f"http://127.0.0.1:{port}", tmp_path / "server.log"
    proc = start_farm_server(tmp_path / "store", port, env=isolated_env(tmp_path, MLFLOW_TRACKING_USERNAME=USER,
                                                                        MLFLOW_TRACKING_PASSWORD=password), log=log,
                             auth=True)
    try:
        assert httpx.get(uri + SEARCH, auth=(USER.encode(), password.encode()), timeout=120).status_code == 200
        ok = _status(uri, tmp_path, MLFLOW_TRACKING_USERNAME=USER, MLFLOW_TRACKING_PASSWORD=password)
        assert _one_line(ok) == f"error: --tracking-uri: no sweep in {uri}"
        trimmed = _status(uri, tmp_path, MLFLOW_TRACKING_USERNAME=USER, MLFLOW_TRACKING_PASSWORD=password.strip() + "!")
        assert "rejected the login of user 'farm-admin'" in _one_line(trimmed)
    finally:
        stop_group(proc)
    assert not _files_hold(tmp_path / "store", password) and password not in log.read_text()


def test_a_token_alone_is_refused_in_one_line_naming_it(server, tmp_path):
    """MLflow's basic-auth app has users and passwords, no tokens: a bearer token is a 401 (was a
    500 from the login cache, retried by the sweep for minutes), and the sweep stops at once."""
    uri = server["uri"]
    bearer = httpx.get(uri + SEARCH, headers={"Authorization": "Bearer some-token"}, timeout=120)
    assert bearer.status_code == 401 and bearer.headers["WWW-Authenticate"].startswith("Basic")
    proc = _farm(["sweep", "--grid", "smoke", "--tracking-uri", uri], tmp_path, MLFLOW_TRACKING_TOKEN="some-token")
    assert _one_line(proc) == (f"error: --tracking-uri: the MLflow server at {uri} takes a user and password (HTTP "
                               "basic auth, as MLflow's auth app does), not the token in MLFLOW_TRACKING_TOKEN: set "
                               "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD")
    assert "some-token" not in proc.stderr + proc.stdout
    assert not (tmp_path / "farm-runs").exists() and not (tmp_path / "mlflow.db").exists()
    # a user without a password is named as such, not as a wrong login
    half = _status(uri, tmp_path, MLFLOW_TRACKING_USERNAME=USER)
    assert _one_line(half).endswith(f"requires a login: MLFLOW_TRACKING_USERNAME names user '{USER}' but no "
                                    "password is set: set MLFLOW_TRACKING_PASSWORD (or ~/.mlflow/credentials)")


def test_the_credentials_file_is_read_as_mlflow_reads_it(server, tmp_path):
    """~/.mlflow/credentials is read by MLflow with %-interpolation: a bare % is one line naming
    the file and key (MLflow's client would raise on every request), a doubled one logs in."""
    creds = tmp_path / ".mlflow" / "credentials"
    creds.parent.mkdir()
    creds.write_text(f"[mlflow]\nmlflow_tracking_username = {USER}\nmlflow_tracking_password = {PASSWORD}\n")
    bare = _status(server["uri"], tmp_path)
    assert _one_line(bare).startswith("error: ~/.mlflow/credentials: mlflow_tracking_password: MLflow cannot read "
                                      "this value: it reads the file with %-interpolation, so a '%' in a password "
                                      "is written '%%' there")
    assert PASSWORD not in bare.stderr and "sure" not in bare.stderr
    creds.write_text(f"[mlflow]\nmlflow_tracking_username = {USER}\n"
                     f"mlflow_tracking_password = {PASSWORD.replace('%', '%%')}\n")
    assert _one_line(_status(server["uri"], tmp_path)) == f"error: --tracking-uri: no sweep in {server['uri']}"
    wrong = _status(server["uri"], tmp_path, MLFLOW_TRACKING_PASSWORD="not-the-password")  # the variable wins
    assert f"rejected the login of user '{USER}' (from ~/.mlflow/credentials and MLFLOW_TRACKING_PASSWORD)" in \
        _one_line(wrong)


class _Locked:
    """Another process holds the server's auth database's exclusive lock (SQLite): the server's
    login check waits for it, then answers 503."""

    def __init__(self, db: Path):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import sqlite3, sys, time\n"
             "c = sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('BEGIN EXCLUSIVE')\n"
             "print('locked', flush=True); time.sleep(600)", str(db)],
            stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert self.proc.stdout.readline().strip() == "locked"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        stop_group(self.proc, grace=2)
        self.proc.stdout.close()


def test_a_server_that_fails_or_hangs_is_one_line_naming_the_login(server, tmp_path):
    uri = server["uri"]
    login = {"MLFLOW_TRACKING_USERNAME": USER, "MLFLOW_TRACKING_PASSWORD": "not-cached-password"}
    with _Locked(server["store"] / "basic_auth.db"):
        failed = _status(uri, tmp_path, **login)
        hung = _status(uri, tmp_path, **login, MLFLOW_HTTP_REQUEST_TIMEOUT="2")
    line = _one_line(failed)
    assert line.startswith(f"error: --tracking-uri: the MLflow server at {uri} answered HTTP 5"), line
    assert line.endswith(f"to an API call with {FROM_VARS}; see the server's log"), line
    assert _one_line(hung) == (f"error: --tracking-uri: the MLflow server at {uri} did not answer an API call within "
                               f"2 s (MLFLOW_HTTP_REQUEST_TIMEOUT), sent with {FROM_VARS}: it answers /health, so it "
                               "is up but busy or stuck; see its log")
    bad = _status(uri, tmp_path, **login, MLFLOW_HTTP_REQUEST_TIMEOUT="soon")
    assert _one_line(bad) == ("error: MLFLOW_HTTP_REQUEST_TIMEOUT: not a whole number of seconds above 0 (how long "
                              "MLflow's client waits for each answer)")


def test_mlflows_own_auth_server_answering_a_token_500_is_one_line(tmp_path):
    """A plain `mlflow server --app-name basic-auth` with MLflow's own login check and its login
    cache on (as farm configured it before): a token is an HTTP 500 there, named as such."""
    (port,) = free_ports(1)
    ini = tmp_path / "basic_auth.ini"
    ini.write_text(f"[mlflow]\ndefault_permission = NO_PERMISSIONS\ndatabase_uri = sqlite:///{tmp_path}/auth.db\n"
                   "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
                   "auth_cache_ttl_seconds = 60\n")
    env = isolated_env(tmp_path, MLFLOW_AUTH_CONFIG_PATH=str(ini), MLFLOW_AUTH_ADMIN_USERNAME=USER,
                       MLFLOW_AUTH_ADMIN_PASSWORD="plain-password-1", MLFLOW_FLASK_SERVER_SECRET_KEY="k" * 32,
                       MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    mlflow = str(Path(sys.executable).with_name("mlflow"))
    with open(tmp_path / "server.log", "wb") as out:
        proc = subprocess.Popen([mlflow, "server", "--app-name", "basic-auth", "--backend-store-uri",
                                 f"sqlite:///{tmp_path}/mlflow.db", "--host", "127.0.0.1", "--port", str(port),
                                 "--workers", "1"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        _wait_health(uri, proc)
        assert httpx.get(uri + SEARCH, headers={"Authorization": "Bearer t0ken"}, timeout=120).status_code == 500
        line = _one_line(_status(uri, tmp_path, MLFLOW_TRACKING_TOKEN="t0ken"))
    finally:
        stop_group(proc)
    assert line == (f"error: --tracking-uri: the MLflow server at {uri} answered HTTP 500 to an API call with the "
                    "token in MLFLOW_TRACKING_TOKEN; MLflow's auth app answers a token so when its login cache is "
                    "on: it takes MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, not a token; see the "
                    "server's log")


def _wait_health(uri: str, proc: subprocess.Popen) -> None:
    import time

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(uri + "/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"mlflow server did not come up (exit {proc.poll()})")


def _admin(uri: str):
    """MLflow's own client of its auth app, as the server's admin."""
    from mlflow.server.auth.client import AuthServiceClient

    return AuthServiceClient(uri)


def test_a_login_without_permission_on_the_sweeps_experiment_is_one_line_before_anything_starts(
        server, tmp_path, monkeypatch):
    """A good login still reaches only the experiments an admin granted it (MLflow's auth app; farm
    server's default is no permission): the sweep was a 403 traceback from its first write, after
    Ray had started. Now one line naming the user and the experiment, nothing started or written,
    and the check itself writes no run."""
    from mlflow.tracking import MlflowClient

    from farm.run.preflight import check_experiment_access

    uri = server["uri"]
    for name, value in {"MLFLOW_TRACKING_USERNAME": USER, "MLFLOW_TRACKING_PASSWORD": PASSWORD}.items():
        monkeypatch.setenv(name, value)
    _admin(uri).create_user("viewer", "viewer-Pass-1234")
    exp_id = MlflowClient(uri).create_experiment("team-sweeps")
    viewer = {"MLFLOW_TRACKING_USERNAME": "viewer", "MLFLOW_TRACKING_PASSWORD": "viewer-Pass-1234"}
    who = "the login of user 'viewer' (from MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD)"

    none = _farm(["sweep", "--grid", "smoke", "--tracking-uri", uri, "--experiment", "team-sweeps"], tmp_path, **viewer)
    assert _one_line(none) == (f"error: --tracking-uri: the MLflow server at {uri} refused {who} reading experiment "
                               "'team-sweeps' (HTTP 403: the user has no permission on it): an admin of the server "
                               "grants the user EDIT on it, or name another experiment (--experiment)")
    assert not (tmp_path / "farm-runs").exists() and "Ray" not in none.stdout

    _admin(uri).grant_user_permission("viewer", "experiment", exp_id, "READ")
    read = _farm(["sweep", "--grid", "smoke", "--tracking-uri", uri, "--experiment", "team-sweeps"], tmp_path, **viewer)
    assert _one_line(read) == (f"error: --tracking-uri: the MLflow server at {uri} lets {who} read experiment "
                               "'team-sweeps' but not write runs to it (HTTP 403): an admin of the server grants the "
                               "user EDIT on it, or name another experiment (--experiment)")
    resume = _farm(["sweep", "--grid", "smoke", "--tracking-uri", uri, "--resume", "0" * 32], tmp_path, **viewer)
    assert "refused " + who + " reading sweep " + "0" * 32 + " (HTTP 403: it is not on this server" in _one_line(resume)

    # EDIT granted, or an experiment the sweep will make (every user may): the check passes, and
    # its probe of the write (a run the server refuses to make) made none
    _admin(uri).revoke_user_permission("viewer", "experiment", exp_id)
    _admin(uri).grant_user_permission("viewer", "experiment", exp_id, "EDIT")
    for name, value in viewer.items():
        monkeypatch.setenv(name, value)
    check_experiment_access(uri, experiment="team-sweeps", resume=None)
    check_experiment_access(uri, experiment="not-made-yet", resume=None)
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", USER)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", PASSWORD)
    assert MlflowClient(uri).search_runs([exp_id]) == []
    assert MlflowClient(uri).get_experiment_by_name("not-made-yet") is None
