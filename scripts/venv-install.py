#!/usr/bin/env python3
"""Install requirements into a venv with uv, honouring pip's own configuration; pip if uv cannot.

    python3 scripts/venv-install.py VENV REQUIREMENT... [pip install options]

Why: `pip install` of farm's environment took 79 s of a clean clone's CI run and the vLLM CPU
engine's 87 s, most of it pip downloading and unpacking wheels one after another; uv resolves the
same versions and installs them, compiled to bytecode as pip does, in about 30 s each (measured
here with an empty cache). uv does not read pip's configuration, and this
project's machines keep torch's CPU build in a local wheel directory and cap torch by a constraints
file, both in pip's configuration (`pip config list`: /etc/pip.conf, PIP_* variables). So what
pip's configuration says about where packages come from (indexes, find-links, constraints,
no-index, trusted hosts, the CA bundle) is read from pip and passed on, and an install resolves as
pip would resolve it.

uv is installed into VENV itself with pip (one wheel, about a second): no tool outside the venv
is assumed. Where uv cannot be installed or fails, the same install runs with pip, and says so.
Only the standard library: this runs before any venv exists.
"""
from __future__ import annotations

import ast
import os
import shlex
import subprocess
import sys
import venv
from pathlib import Path

UV = "uv>=0.9,<1"
# pip's configuration keys -> uv's flags. For `pip install`, a PIP_* variable overrides the
# [install] section, which overrides [global]; pip takes each key from the first scope that has it.
FLAGS = {"find-links": "--find-links", "extra-index-url": "--extra-index-url",
         "constraint": "--constraint", "index-url": "--index-url", "trusted-host": "--allow-insecure-host"}
SWITCHES = {"no-index": "--no-index"}  # pip's booleans: on for 1, true, yes, on
SCOPES = (":env:", "install", "global")


def pip_config(python: str) -> list[tuple[str, str, str]]:
    """(scope, key, value) from `pip config list`; its values are Python literals of strings."""
    out = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False).stdout
    entries = []
    for line in out.splitlines():
        name, sep, raw = line.partition("=")
        scope, dot, key = name.rpartition(".")
        if not sep or not dot:
            continue
        try:
            value = ast.literal_eval(raw)  # pip prints each value with repr()
        except (ValueError, SyntaxError):
            continue
        entries.append((scope, key, str(value)))
    return entries


def uv_options(entries: list[tuple[str, str, str]]) -> list[str]:
    """uv flags for what pip's configuration says about where `pip install` takes packages from."""
    chosen: dict[str, tuple[int, str]] = {}
    for scope, key, value in entries:
        if (key in FLAGS or key in SWITCHES) and scope in SCOPES:
            rank = SCOPES.index(scope)
            if key not in chosen or rank < chosen[key][0]:
                chosen[key] = (rank, value)
    options: list[str] = []
    for key, flag in FLAGS.items():
        if key in chosen:
            for item in chosen[key][1].split():  # pip's lists are whitespace-separated
                options += [flag, item]
    for key, flag in SWITCHES.items():
        if key in chosen and chosen[key][1].strip().lower() in ("1", "true", "yes", "on"):
            options.append(flag)
    return options


def uv_env(entries: list[tuple[str, str, str]]) -> dict[str, str]:
    """pip's `cert` (a CA bundle) is uv's SSL_CERT_FILE, unless the environment already names one."""
    env = dict(os.environ)
    certs = sorted((SCOPES.index(scope), value) for scope, key, value in entries if key == "cert" and scope in SCOPES)
    if certs and "SSL_CERT_FILE" not in env:
        env["SSL_CERT_FILE"] = certs[0][1]
    return env


def run(cmd: list[str], env: dict[str, str] | None = None) -> int:
    return subprocess.run(cmd, check=False, env=env).returncode


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: venv-install.py VENV REQUIREMENT... [pip install options]", file=sys.stderr)
        return 2
    env_dir, requirements = Path(argv[0]), argv[1:]
    python = env_dir / "bin" / "python"
    if not python.exists():
        venv.create(env_dir, with_pip=True)
    py = str(python)
    uv = env_dir / "bin" / "uv"
    if uv.exists() or run([py, "-m", "pip", "install", "-q", UV]) == 0:
        # pip takes the best version across all its indexes; uv by default only from the first index
        # that has the package (here a local index held ray 2.58 and PyPI the 2.60 farm pins).
        # And pip compiles every module to bytecode as it installs; uv only when asked. Without it a
        # machine with PYTHONDONTWRITEBYTECODE=1 (this one) compiles Ray's, MLflow's and torch's
        # imports again in every process: a clean clone's unit tests ran markedly slower.
        config = pip_config(py)
        cmd = [str(uv), "pip", "install", "-q", "--compile-bytecode", "--python", py,
               "--index-strategy", "unsafe-best-match", *uv_options(config), *requirements]
        if run(cmd, uv_env(config)) == 0:
            return 0
        print(f"venv-install: uv failed ({shlex.join(cmd)}); installing with pip", file=sys.stderr)
    else:
        print("venv-install: uv could not be installed; installing with pip", file=sys.stderr)
    return run([py, "-m", "pip", "install", "-q", *requirements])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
