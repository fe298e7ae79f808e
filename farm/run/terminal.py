"""Where `farm sweep` writes: one console for everything a person reads while a sweep runs, and
`answer` for the lines a script reads (the recommended command, the sweep id).

Three modes: `normal` (both on stdout; live progress when stdout is a terminal), `quiet` (only
the answer lines), `json` (stdout holds the JSON summary alone; the person's lines go to stderr).
"""

from __future__ import annotations

import json
import sys

from rich.console import Console

MODES = ("normal", "quiet", "json")

console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
_state = {"mode": "normal"}


def set_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(mode)
    _state["mode"] = mode
    console.quiet = mode == "quiet"
    console.file = sys.stderr if mode == "json" else sys.stdout


def mode() -> str:
    return _state["mode"]


def live() -> bool:
    """Live progress only for a person at a terminal."""
    return mode() == "normal" and sys.stdout.isatty()


def answer(line: str) -> None:
    """A line a user pastes or a script reads: plain, never wrapped; not in --json (the JSON has it)."""
    if mode() != "json":
        print(line, flush=True)


def emit_json(obj: dict) -> None:
    if mode() == "json":
        sys.stdout.write(json.dumps(obj, indent=2) + "\n")
        sys.stdout.flush()
