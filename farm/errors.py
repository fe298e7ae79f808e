"""User-facing errors: one line naming the file, the key path and the reason.

The CLI turns every `UserError` into that line on stderr and exit code 2, so a typo in a
study file never ends in a traceback. The line stays one line and short whatever it quotes (a
pasted command, a file's text where a name belongs): `bounded_line` escapes what a terminal
would not show as one line and cuts it at `MAX_LINE_CHARS`, saying how long it was.
"""

from __future__ import annotations

MAX_LINE_CHARS = 1000  # an error line's most characters: a terminal's few lines, never a pasted file


def _escaped(char: str) -> str:
    # Newlines, tabs, terminal escapes and lone surrogates (text with no UTF-8) as Python writes them.
    if char.isprintable() and not 0xD800 <= ord(char) <= 0xDFFF:
        return char
    return repr(char)[1:-1]


def bounded_line(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """`text` as one printable line of at most `limit` characters (more: its start, `...` and the
    whole length, so a reader knows what was cut)."""
    line = "".join(_escaped(c) for c in text)
    if len(line) <= limit:
        return line
    tail = f"... ({len(line):,} characters in all)"
    return line[: max(0, limit - len(tail))] + tail


class UserError(Exception):
    """A mistake in the user's input (file, flag, address): reported, never a traceback."""

    exit_code = 2

    def __init__(self, reason: str, *, file: str | None = None, key: str | None = None):
        self.reason = reason
        self.file = file
        self.key = key
        super().__init__(self.line())

    def line(self) -> str:
        where = ": ".join(part for part in (self.file, self.key) if part)
        return bounded_line(f"{where}: {self.reason}" if where else self.reason)


class SLONotMet(UserError):
    """No trial meets a capacity profile's SLO even at its lowest load: the sweep ran, and says so.

    Its own exit code, so a script tells it from a failed sweep (1) and from a mistake (2)."""

    exit_code = 3


class ClusterError(UserError):
    """The cluster could not do what farm asked (not the user's input): the same one line, exit
    code 1, as a failed sweep."""

    exit_code = 1


class SpecError(UserError):
    """The study file is malformed, has unknown keys, or names things that do not exist."""


def key_path(loc: tuple) -> str:
    """A pydantic error location as the user's key path: `grids.smoke.blocks[0].engine`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out
