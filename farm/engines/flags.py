"""Engine flags as argv and back: `render_flag`/`render_flags` (a study's flags as `--name=value`),
`parse_cli_flags` (their inverse, for results files and MLflow), and `redact_args` (a secret
flag's value masked as `SECRET_MASK`). `farm.engines.base` re-exports these names."""

from __future__ import annotations

import json
from typing import Any


SECRET_MASK = "***"


def render_flag(name: str, value: Any) -> list[str]:
    """`true` -> `--flag`; false/None -> nothing; dict/list -> JSON; else `--flag=value`."""
    if value is None or value is False:
        return []
    if value is True:
        return [f"--{name}"]
    if isinstance(value, (dict, list)):
        value = json.dumps(value, separators=(",", ":"))
    return [f"--{name}={value}"]


def render_flags(flags: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for name, value in flags.items():
        args += render_flag(name, value)
    return args


def parse_cli_flags(flags: list[str]) -> dict[str, Any]:
    """The inverse of `render_flags` for `--name=value` / `--name` strings (results files, MLflow)."""
    out: dict[str, Any] = {}
    for flag in flags:
        name, sep, value = flag.lstrip("-").partition("=")
        if not sep:
            out[name] = True
            continue
        try:
            parsed = json.loads(value)
            out[name] = parsed if isinstance(parsed, (dict, list)) else value
        except ValueError:
            out[name] = value
    return out


def redact_args(args: list[str], secret_flags: set[str]) -> list[str]:
    """Mask the values of secret flags in an argv (both `--k=v` and `--k v` forms)."""
    out: list[str] = []
    mask_next = False
    for arg in args:
        if mask_next:
            out.append(SECRET_MASK)
            mask_next = False
            continue
        if arg.startswith("--"):
            name, sep, _ = arg[2:].partition("=")
            if name in secret_flags:
                if sep:
                    out.append(f"--{name}={SECRET_MASK}")
                else:
                    out.append(arg)
                    mask_next = True
                continue
        out.append(arg)
    return out
