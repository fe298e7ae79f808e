"""`farm server`: the shared MLflow tracking server of a cluster.

`mlflow server --serve-artifacts`: runs, metrics and artifacts all go over HTTP to this one
process, so the nodes need no shared filesystem. Runs and params live in a SQLite file and
artifacts in a folder, both under `--store`. It binds 127.0.0.1 unless told otherwise; on a
cluster give `--host` the head's cluster-network address and either `--auth` (MLflow's
basic-auth app: every client needs MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD) or keep
the port reachable from the cluster network only.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import sys
from pathlib import Path

import click

from farm.cli import options as opt
from farm.errors import UserError

# A sweep's actors, client hosts and driver each log several requests a second; a minute of trust
# keeps the server's CPU for them (the password check is PBKDF2 by design) and bounds how long a
# revoked password still works, as MLflow's own option documents.
AUTH_CACHE_DEFAULT_S = 60

# MLflow reads this file with configparser's %-interpolation: the credentials never go in it (they
# reach MLflow's auth app in its MLFLOW_AUTH_ADMIN_* variables, read as they are), and the one path
# in it has each % doubled (`_ini_value`).
AUTH_INI = """[mlflow]
# Written by `farm server --auth`. New users get no permission until the admin grants one. The
# admin account comes from MLFLOW_AUTH_ADMIN_USERNAME / _PASSWORD in the server's environment.
default_permission = NO_PERMISSIONS
database_uri = sqlite:///{db}
# MLflow's basic-auth check, and its 401 for a bearer token (MLFLOW_TRACKING_TOKEN) instead of a 500
authorization_function = farm.store.auth:authenticate_basic_only
# A credential that passed is trusted for this many seconds in each server worker (farm server
# --auth-cache-s): without it every request checks the password's PBKDF2 hash, tens of ms of CPU.
auth_cache_ttl_seconds = {cache_s}
"""


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def server_command(store: Path, host: str, port: int, *, auth: bool, allowed_hosts: str | None,
                   workers: int) -> list[str]:
    mlflow = str(Path(sys.executable).with_name("mlflow"))
    argv = [mlflow, "server", "--serve-artifacts",
            "--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}",
            "--artifacts-destination", str(store / "artifacts"),
            "--host", host, "--port", str(port), "--workers", str(workers)]
    if allowed_hosts:
        argv += ["--allowed-hosts", allowed_hosts]
    if auth:
        argv += ["--app-name", "basic-auth"]
    return argv


def _check_admin_password(password: str) -> None:
    """MLflow's own password policy, applied here: the auth app would otherwise die at start with
    a traceback in the server's output."""
    # mlflow (seconds of imports) only with --auth, where its password policy applies.
    from farm.store.auth import password_refusal

    why = password_refusal(password)
    if why is not None:
        raise UserError(f"MLFLOW_TRACKING_PASSWORD is not a valid admin password for MLflow: {why}", key="--auth")


def _not_utf8(value: str) -> bool:
    # a variable whose bytes are not UTF-8 (Python keeps them as lone surrogates): MLflow hashes
    # the password's UTF-8 and clients send UTF-8, so such a login could never pass
    try:
        value.encode()
    except UnicodeEncodeError:
        return True
    return False


def _admin_credentials() -> tuple[str, str]:
    """The admin account for MLflow's basic-auth app, checked before anything is written. Any
    password MLflow's policy takes is taken as it is: `%`, quotes, `;`, spaces at either end,
    non-ASCII letters (it never goes through a parser on its way to MLflow)."""
    try:
        import flask_wtf  # noqa: F401  (the basic-auth app needs it: pip install 'mlflow[auth]')
    except ImportError:
        raise UserError("needs MLflow's auth extra: pip install 'mlflow[auth]'", key="--auth") from None
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if not user or not password:
        raise UserError("set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (the admin account; "
                        "clients use the same variables)", key="--auth")
    if ":" in user:
        raise UserError("MLFLOW_TRACKING_USERNAME holds a ':', which no HTTP basic-auth login can carry (the "
                        "user name ends at the first ':'): choose a user name without one", key="--auth")
    for name, value in (("MLFLOW_TRACKING_USERNAME", user), ("MLFLOW_TRACKING_PASSWORD", password)):
        if _not_utf8(value):
            raise UserError(f"{name} is not valid UTF-8 (the bytes of another encoding): MLflow and its clients "
                            f"send logins as UTF-8, so it could never log in", key="--auth")
    _check_admin_password(password)
    return user, password


def _check_stored_admin(store: Path, user: str, password: str) -> None:
    """A store whose admin account exists keeps its password: MLflow sets it only when it creates
    the account, so a changed MLFLOW_TRACKING_PASSWORD would start a server that refuses it."""
    from farm.store.auth import stored_password_differs

    db = store / "basic_auth.db"
    if stored_password_differs(db, user, password):
        raise UserError(f"MLFLOW_TRACKING_PASSWORD is not the password user {user!r} has in {db}: MLflow sets an "
                        f"admin's password only when it creates the account; give that one, change it through "
                        f"MLflow's users/update-password API, or start a new --store", key="--auth")


def _ini_value(text: str) -> str:
    """`text` as configparser's %-interpolation reads it back (MLflow reads basic_auth.ini so)."""
    return text.replace("%", "%%")


def _auth_env(store: Path, user: str, password: str, cache_s: int) -> dict[str, str]:
    """MLflow's basic-auth app: its config and a Flask secret key, both kept in the store (mode
    0600), and the admin account in the variables MLflow's auth app reads as they are
    (MLFLOW_AUTH_ADMIN_USERNAME / _PASSWORD): never in the config file, which MLflow parses with
    %-interpolation (a `%` in a password killed the server at start), and never on disk."""
    ini = store / "basic_auth.ini"
    ini.write_text(AUTH_INI.format(db=_ini_value(str(store / "basic_auth.db")), cache_s=cache_s))
    ini.chmod(0o600)
    key_file = store / "flask_secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_hex(32))
        key_file.chmod(0o600)
    return {"MLFLOW_AUTH_CONFIG_PATH": str(ini), "MLFLOW_FLASK_SERVER_SECRET_KEY": key_file.read_text().strip(),
            "MLFLOW_AUTH_ADMIN_USERNAME": user, "MLFLOW_AUTH_ADMIN_PASSWORD": password}


@click.command("server")
@click.option("--store", type=opt.DIRECTORY, default="mlflow-server", show_default=True,
              help="Folder of the server's SQLite store (mlflow.db) and artifacts (artifacts/).")
@click.option("--host", type=opt.HOST, default="127.0.0.1", show_default=True,
              help="Address to bind; on a cluster, the head's address on the cluster network.")
@click.option("--port", type=opt.PORT, default=5000, show_default=True)
@click.option("--auth", is_flag=True, help="MLflow's basic-auth app (admin from MLFLOW_TRACKING_USERNAME/PASSWORD).")
@click.option("--allowed-hosts", type=opt.HOST_LIST, default=None,
              help="Host headers the server accepts (MLflow's default: localhost and private addresses).")
@click.option("--workers", type=opt.WORKERS, default=2, show_default=True, help="Server worker processes.")
@click.option("--auth-cache-s", type=opt.AUTH_CACHE_S, default=None,
              help="With --auth: seconds a checked login is trusted by each server worker (default 60; 0: "
                   "check the password hash on every request, MLflow's own default). A changed or revoked "
                   "password may still pass for this long.")
def server(store: str, host: str, port: int, auth: bool, allowed_hosts: str | None, workers: int,
           auth_cache_s: int | None) -> None:
    """Start the shared MLflow tracking server (runs in the foreground; Ctrl-C stops it)."""
    if auth_cache_s is not None and not auth:
        raise UserError("only with --auth (it caches the basic-auth app's password checks)", key="--auth-cache-s")
    admin = _admin_credentials() if auth else None
    root = Path(store).resolve()
    root.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # MLflow 3's job execution (GenAI judges, prompt optimization, trace rollups) starts a job runner
    # and seven huey consumers beside the server, each importing MLflow: measured here (3.17), 24 s
    # of CPU to start and 1.8 GiB resident for features farm never calls. Off unless the user's
    # environment says.
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    if admin:
        _check_stored_admin(root, *admin)
        env.update(_auth_env(root, *admin, cache_s=AUTH_CACHE_DEFAULT_S if auth_cache_s is None else auth_cache_s))
    argv = server_command(root, host, port, auth=auth, allowed_hosts=allowed_hosts, workers=workers)
    shown = "0.0.0.0" if host in ("0.0.0.0", "::") else host
    click.echo(f"farm server: MLflow at http://{shown}:{port} (store {root}); nodes log with "
               f"--tracking-uri http://<this host's cluster address>:{port}", err=True)
    if not auth and not _is_loopback(host):
        click.echo("farm server: no authentication: keep this port reachable from the cluster network only, "
                   "or restart with --auth", err=True)
    click.echo("farm server: " + " ".join(argv), err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, env)
