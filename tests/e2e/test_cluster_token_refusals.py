"""A Ray cluster with token authentication, joined from a machine without its token or with the
wrong one (issue 29): `farm sweep` with the head's GCS address (`--address HOST:PORT` or
`RAY_ADDRESS`) or its Ray Client address (`ray://`) ends in one line on stderr naming the option
or variable the address came from and why, exit code 2, no traceback, and nothing written: no
MLflow store, no workdir. The head is the session's (tests/conftest.py: token_head), a real
`ray start --head` with RAY_AUTH_MODE=token; each `farm` runs with a HOME of its own (no
~/.ray/auth_token but the one a case puts there).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from raynodes import free_ports, stop_group
from refusals import mock_study
from sweeptools import isolated_env, start_farm_server

pytestmark = pytest.mark.slow

WRONG = "0" * 32
MISSING = ("requires a token: set RAY_AUTH_TOKEN or copy ~/.ray/auth_token from the head "
           "(`ray get-auth-token` there)")


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """A tracking server for the Ray Client route (a cluster sweep logs to a server every node
    reaches); nothing is written to it when the address is refused."""
    tmp = tmp_path_factory.mktemp("token-refusals-mlflow")
    (port,) = free_ports(1)
    proc = start_farm_server(tmp / "store", port, env=isolated_env(tmp), log=tmp / "server.log", timeout=120)
    try:
        yield {"uri": f"http://127.0.0.1:{port}", "store": tmp / "store"}
    finally:
        stop_group(proc)


def _sweep(tmp: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`farm sweep` of the smallest mock study, run in `tmp/work` with HOME `tmp/home`."""
    work, home = tmp / "work", tmp / "home"
    work.mkdir()
    home.mkdir(exist_ok=True)
    (work / "s.yaml").write_text(mock_study("token"))
    return subprocess.run([sys.executable, "-m", "farm.cli", "sweep", "--config", "s.yaml", "--grid", "g", *args],
                          cwd=work, env={**isolated_env(home), **env}, capture_output=True, text=True, timeout=180)


def _assert_one_line(proc: subprocess.CompletedProcess, work: Path, key: str, address: str, reason: str) -> None:
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith(f"error: {key}: the Ray cluster at {address} "), lines[0]
    assert reason in lines[0], lines[0]
    assert sorted(p.name for p in work.iterdir()) == ["s.yaml"], "something was written"  # no mlflow.db, no farm-runs


def _token_env(token: str | None, home: Path) -> dict[str, str]:
    """No token, the wrong one in RAY_AUTH_TOKEN, or the wrong one in ~/.ray/auth_token."""
    if token == "env":
        return {"RAY_AUTH_TOKEN": WRONG}
    if token == "file":
        (home / ".ray").mkdir(parents=True)
        (home / ".ray" / "auth_token").write_text(WRONG + "\n")
    return {}


REASONS = {None: MISSING, "env": "rejected the token (from RAY_AUTH_TOKEN)",
           "file": "rejected the token (from ~/.ray/auth_token)"}


# Each way a token can be missing or wrong, through --address; RAY_ADDRESS once: what it changes is
# only the name the line gives (each case is a farm process and a probe: CI time).
@pytest.mark.parametrize("source, token", [("--address", None), ("--address", "env"), ("--address", "file"),
                                           ("RAY_ADDRESS", None)],
                         ids=["no-token", "wrong-token", "wrong-token-file", "RAY_ADDRESS-no-token"])
def test_a_gcs_address_without_the_right_token_is_one_line(tmp_path, token_head, source, token):
    env = _token_env(token, tmp_path / "home")
    address = token_head["gcs"]
    args: tuple[str, ...] = ("--tracking-uri", "sqlite:///mlflow.db")
    if source == "--address":
        args += ("--address", address)
    else:
        env["RAY_ADDRESS"] = address
    proc = _sweep(tmp_path, *args, env=env)
    _assert_one_line(proc, tmp_path / "work", source, address, REASONS[token])
    assert token_head["token"] not in proc.stdout + proc.stderr and WRONG not in proc.stdout + proc.stderr


@pytest.mark.parametrize("token", [None, "env"], ids=["no-token", "wrong-token"])
def test_a_ray_client_address_without_the_right_token_is_one_line(tmp_path, token_head, mlflow_server, token):
    env = _token_env(token, tmp_path / "home")
    proc = _sweep(tmp_path, "--address", token_head["client"], "--tracking-uri", mlflow_server["uri"], env=env)
    _assert_one_line(proc, tmp_path / "work", "--address", token_head["client"], REASONS[token])
    from mlflow.tracking import MlflowClient

    assert not [e for e in MlflowClient(mlflow_server["uri"]).search_experiments() if e.name != "Default"]


def test_token_mode_without_a_token_is_one_line_not_rays_abort(tmp_path, token_head):
    """RAY_AUTH_MODE=token on a machine with no token: Ray's token loader would abort the process."""
    proc = _sweep(tmp_path, "--address", token_head["gcs"], env={"RAY_AUTH_MODE": "token"})
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines() == [
        "error: RAY_AUTH_MODE: is 'token', but this machine has no cluster token: set RAY_AUTH_TOKEN or copy "
        "~/.ray/auth_token from the head (`ray get-auth-token` there)"]
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["s.yaml"]
