"""`farm server --auth`: MLflow's basic-auth app in front of a --serve-artifacts server. A client
without the credentials gets 401; with them it logs a run and uploads an artifact over HTTP; a
whole `farm sweep` (two mock trials, one profile) logs into it; a sweep without the login stops before it starts; the password
is in neither the server's output nor its command line, nor anything the sweep wrote."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from raynodes import free_ports, set_env, stop_group
from sweeptools import isolated_env, route_study, start_farm_server

pytestmark = pytest.mark.slow

PASSWORD = "farm-test-Pa55word"
ADMIN = {"MLFLOW_TRACKING_USERNAME": "farm-admin", "MLFLOW_TRACKING_PASSWORD": PASSWORD}


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("auth-server")
    (port,) = free_ports(1)
    log = tmp / "server.log"
    proc = start_farm_server(tmp / "store", port, env=isolated_env(tmp, **ADMIN), log=log, auth=True)
    try:
        yield {"uri": f"http://127.0.0.1:{port}", "store": tmp / "store", "log": log, "proc": proc}
    finally:
        stop_group(proc)


def test_basic_auth_server(auth_server, tmp_path):
    from mlflow.tracking import MlflowClient

    uri = auth_server["uri"]
    search = uri + "/api/2.0/mlflow/experiments/search?max_results=5"
    assert httpx.get(search, timeout=120).status_code == 401
    assert httpx.get(search, auth=("farm-admin", "wrong-password"), timeout=120).status_code == 401
    assert httpx.get(search, auth=("farm-admin", PASSWORD), timeout=120).status_code == 200

    restore_env = set_env(ADMIN)
    try:
        client = MlflowClient(uri)
        run = client.create_run(client.create_experiment("auth-test"))
        (tmp_path / "up").mkdir()
        (tmp_path / "up" / "engine.log").write_text("hello\n")
        client.log_artifacts(run.info.run_id, str(tmp_path / "up"), "files")
        assert [a.path for a in client.list_artifacts(run.info.run_id, "files")] == ["files/engine.log"]
    finally:
        restore_env()
    assert list((auth_server["store"] / "artifacts").rglob("engine.log"))  # stored by the server, over HTTP
    ini = auth_server["store"] / "basic_auth.ini"
    assert oct(ini.stat().st_mode & 0o777) == "0o600"
    # MLflow's own reading of the config farm wrote: a checked login is trusted for a minute (no
    # PBKDF2 check on each of a sweep's requests), a wrong one is checked every time (the 401 above)
    from mlflow.server.auth.config import read_auth_config
    restore_env = set_env({"MLFLOW_AUTH_CONFIG_PATH": str(ini)})
    try:
        assert read_auth_config().auth_cache_ttl_seconds == 60
    finally:
        restore_env()
    text = auth_server["log"].read_text()
    assert "--app-name basic-auth" in text and PASSWORD not in text
    # the server and its HTTP worker, without MLflow's job runner and its huey consumers (farm
    # never runs MLflow jobs; they cost seconds of CPU and memory each on the head)
    group = _group_commands(auth_server["proc"].pid)
    assert any("mlflow server" in c for c in group) and any("uvicorn" in c for c in group), group
    assert not [c for c in group if "huey" in c or "jobs._job_runner" in c], group


def _group_commands(pgid: int) -> list[str]:
    """The command lines of the processes in one process group (the server's, started in its own)."""
    from actors.watchdog import group_members

    commands = []
    for pid, _ in group_members(pgid) or []:
        try:
            commands.append(Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " "))
        except OSError:  # gone meanwhile
            pass
    return commands


@pytest.mark.parametrize("login, message", [
    ({}, "requires a login: set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or ~/.mlflow/credentials)"),
    ({**ADMIN, "MLFLOW_TRACKING_PASSWORD": "not-it"}, "rejected the login of user 'farm-admin' (from "
                                                      "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD): wrong "
                                                      "user or password"),
])
def test_a_sweep_without_the_servers_login_stops_in_one_line_before_anything_starts(auth_server, tmp_path, login,
                                                                                    message):
    proc = subprocess.run([sys.executable, "-m", "farm.cli", "sweep", "--grid", "smoke", "--tracking-uri",
                           auth_server["uri"]], cwd=tmp_path, env=isolated_env(tmp_path, **login), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.strip() == f"error: --tracking-uri: the MLflow server at {auth_server['uri']} {message}"
    assert not (tmp_path / "farm-runs").exists() and not (tmp_path / "mlflow.db").exists()


def test_a_whole_sweep_logs_into_the_authenticated_server(auth_server, tmp_path):
    """Credentials as a user keeps them: in ~/.mlflow/credentials, read by the driver and the actors."""
    from mlflow.tracking import MlflowClient

    (tmp_path / ".mlflow").mkdir()
    (tmp_path / ".mlflow" / "credentials").write_text(f"[mlflow]\nmlflow_tracking_username = farm-admin\n"
                                                      f"mlflow_tracking_password = {PASSWORD}\n")
    study = route_study(tmp_path / "study.yaml")
    proc = subprocess.run([sys.executable, "-m", "farm.cli", "sweep", "--config", str(study), "--grid", "two",
                           "--experiment", "auth-sweep", "--tracking-uri", auth_server["uri"]], cwd=tmp_path,
                          env=isolated_env(tmp_path), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "recommended" in proc.stdout and PASSWORD not in proc.stdout + proc.stderr

    restore_env = set_env(ADMIN)
    try:
        client = MlflowClient(auth_server["uri"])
        exp = client.get_experiment_by_name("auth-sweep")
        sweeps = client.search_runs([exp.experiment_id], filter_string="tags.`farm.kind` = 'sweep'")
        children = client.search_runs([exp.experiment_id], filter_string="tags.`farm.kind` = 'trial'")
        # each trial's engine log went over HTTP into the server's artifact store
        logs = {c.info.run_id: [a.path for a in client.list_artifacts(c.info.run_id, "files")] for c in children}
    finally:
        restore_env()
    assert len(sweeps) == 1 and sweeps[0].data.tags["farm.status"] == "finished"
    assert len(children) == 2 and {c.data.tags["farm.status"] for c in children} == {"ok"}
    for run in [*sweeps, *children]:
        assert PASSWORD not in repr(run.data.params) + repr(run.data.tags)
    assert all("files/engine.log" in paths for paths in logs.values()), logs
    written = [p for p in (tmp_path / "farm-runs").rglob("*") if p.is_file()]
    written += [p for p in auth_server["store"].rglob("*") if p.is_file()]  # its auth config too
    assert written and not [p for p in written if PASSWORD.encode() in p.read_bytes()]


@pytest.mark.parametrize("admin, message", [
    ({}, "set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (the admin account; clients use the same "
         "variables)"),
    ({**ADMIN, "MLFLOW_TRACKING_PASSWORD": "short"}, "MLFLOW_TRACKING_PASSWORD is not a valid admin password for "
                                                     "MLflow: Password must be at least 12 characters"),
    ({**ADMIN, "MLFLOW_TRACKING_USERNAME": "farm:admin"}, "MLFLOW_TRACKING_USERNAME holds a ':', which no HTTP "
                                                          "basic-auth login can carry"),
    ({**ADMIN, "MLFLOW_TRACKING_PASSWORD": b"caf\xe9-latin-1-password"}, "MLFLOW_TRACKING_PASSWORD is not valid UTF-8"),
])
def test_auth_needs_valid_admin_credentials_before_anything_is_written(tmp_path, admin, message):
    proc = subprocess.run([sys.executable, "-m", "farm.cli", "server", "--auth", "--store", str(tmp_path / "s")],
                          env=isolated_env(tmp_path, **admin), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith(f"error: --auth: {message}"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "short" not in proc.stderr
    assert not (tmp_path / "s").exists()
