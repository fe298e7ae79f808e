"""The engine protocol: everything farm needs to know to launch, probe and judge one engine.

Each engine is one file in this package with one `Engine` subclass. Command building and log
classification are pure functions of their inputs, tested with parametrize tables; nothing
here starts a process or talks to a server (the effects layer does, using what this says).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any, ClassVar

from farm.spec import EngineSpec
from farm.trial import Trial

SECRET_MASK = "***"


@dataclass(frozen=True)
class FailurePattern:
    """A log line pattern that tells why an engine failed."""

    pattern: str
    status: str
    reason: str

    def search(self, text: str) -> re.Match | None:
        return re.search(self.pattern, text, re.MULTILINE)


@dataclass(frozen=True)
class Failure:
    status: str
    reason: str
    line: str


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


class Engine:
    """Base of every engine adapter. Subclasses set the class attributes and may override methods."""

    name: ClassVar[str]
    default_launcher: ClassVar[list[str]]
    model_arg: ClassVar[str | None] = None  # None: the model is a positional argument after the launcher
    port_flag: ClassVar[str] = "port"
    host_flag: ClassVar[str] = "host"
    ready_path: ClassVar[str] = "/health"
    reset_cache_path: ClassVar[str | None] = None
    metrics_path: ClassVar[str | None] = None
    uses_gpus: ClassVar[bool] = True
    failure_patterns: ClassVar[list[FailurePattern]] = []
    secret_flag_names: ClassVar[frozenset[str]] = frozenset({"api-key", "hf-token", "token"})

    # -- resources -----------------------------------------------------------------------
    def gpus(self, flags: dict[str, Any]) -> int:
        """GPUs one trial needs, all on one node."""
        return 0

    # -- command -------------------------------------------------------------------------
    def launcher(self, spec: EngineSpec) -> list[str]:
        return list(spec.launcher or self.default_launcher)

    def model_args(self, model: str) -> list[str]:
        return [f"--{self.model_arg}={model}"] if self.model_arg else [model]

    def serve_args(self, trial: Trial) -> list[str]:
        return self.model_args(trial.model) + render_flags(trial.all_flags)

    def command(self, spec: EngineSpec, trial: Trial, *, port: int, host: str | None = None) -> list[str]:
        """The exact argv that starts the server for `trial` on `host:port`."""
        return (
            self.launcher(spec)
            + self.serve_args(trial)
            + render_flag(self.host_flag, host or spec.host)
            + render_flag(self.port_flag, port)
        )

    def serve_command(self, spec: EngineSpec, trial: Trial) -> str:
        """What a user pastes to serve this configuration (no host, port or secrets)."""
        return shlex.join(redact_args(self.launcher(spec) + self.serve_args(trial), self.secret_flags(spec)))

    def secret_flags(self, spec: EngineSpec) -> set[str]:
        return set(self.secret_flag_names) | {f.lstrip("-") for f in spec.secret_flags}

    # -- environment ---------------------------------------------------------------------
    def env(self, spec: EngineSpec, trial: Trial) -> dict[str, str]:
        """Variables this engine needs on top of the node's environment."""
        return dict(spec.env)

    # -- probing -------------------------------------------------------------------------
    def version_command(self, spec: EngineSpec) -> list[str] | None:
        return None

    def parse_version(self, output: str) -> str | None:
        match = re.search(r"\d+\.\d+(?:\.\d+)?(?:[\w.+-]*)", output)
        return match.group(0) if match else None

    def reported_capacity(self, log_text: str) -> dict[str, float]:
        """What the engine says it got (KV-cache tokens, max sequences...), read from its log."""
        return {}

    # -- failures ------------------------------------------------------------------------
    def classify(self, log_text: str) -> Failure | None:
        """The first known failure pattern found in the log, in the table's order of priority."""
        for fp in self.failure_patterns:
            match = fp.search(log_text)
            if match:
                line_start = log_text.rfind("\n", 0, match.start()) + 1
                line_end = log_text.find("\n", match.end())
                line = log_text[line_start: line_end if line_end >= 0 else None].strip()
                return Failure(fp.status, fp.reason, line[:500])
        return None


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
