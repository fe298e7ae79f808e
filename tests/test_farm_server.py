"""`farm server --auth`: MLflow's basic-auth app in front of a --serve-artifacts server. A client
without the credentials gets 401; with them it logs a run and uploads an artifact over HTTP; the
password is in neither the server's output nor its command line."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest

from raynodes import free_ports, stop_group

pytestmark = pytest.mark.slow

PASSWORD = "farm-test-Pa55word"


def test_basic_auth_server(tmp_path):
    from mlflow.tracking import MlflowClient

    (port,) = free_ports(1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING")}
    env.update(MLFLOW_TRACKING_USERNAME="farm-admin", MLFLOW_TRACKING_PASSWORD=PASSWORD, HOME=str(tmp_path))
    log = tmp_path / "server.log"
    with open(log, "ab") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "farm.cli", "server", "--auth", "--store", str(tmp_path / "store"),
                                 "--port", str(port), "--workers", "1"], env=env, cwd=tmp_path, stdout=fh,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(uri + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        search = uri + "/api/2.0/mlflow/experiments/search?max_results=5"
        assert httpx.get(search, timeout=120).status_code == 401
        assert httpx.get(search, auth=("farm-admin", "wrong-password"), timeout=120).status_code == 401
        assert httpx.get(search, auth=("farm-admin", PASSWORD), timeout=120).status_code == 200

        saved = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")}
        os.environ.update(MLFLOW_TRACKING_USERNAME="farm-admin", MLFLOW_TRACKING_PASSWORD=PASSWORD)
        try:
            client = MlflowClient(uri)
            run = client.create_run(client.create_experiment("auth-test"))
            (tmp_path / "up").mkdir()
            (tmp_path / "up" / "engine.log").write_text("hello\n")
            client.log_artifacts(run.info.run_id, str(tmp_path / "up"), "files")
            assert [a.path for a in client.list_artifacts(run.info.run_id, "files")] == ["files/engine.log"]
        finally:
            for k, v in saved.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        assert list((tmp_path / "store" / "artifacts").rglob("engine.log"))  # stored by the server, over HTTP
        assert oct((tmp_path / "store" / "basic_auth.ini").stat().st_mode & 0o777) == "0o600"
    finally:
        stop_group(proc)
    text = log.read_text()
    assert "--app-name basic-auth" in text and PASSWORD not in text


def test_auth_needs_the_admin_credentials(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING")}
    proc = subprocess.run([sys.executable, "-m", "farm.cli", "server", "--auth", "--store", str(tmp_path / "s")],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: --auth: set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD "
                                   "(the admin account; clients use the same variables)")
