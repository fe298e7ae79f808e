"""How an engine's failure is told from its log: `FailurePattern` (a log line's pattern, the
status and reason it means), `Failure` (what matched), and `first_exception` (the first exception a
log names, which a wrapper pattern's failure shows). Each engine lists its patterns
(farm/engines/base.py `Engine`); `farm.engines.base` re-exports these names."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class FailurePattern:
    """A log line pattern that tells why an engine failed. A `wrapper` pattern is the engine's own
    "failed, see above" line: the cause is the first exception the log names before it, which
    the failure line then shows instead of the wrapper's words."""

    pattern: str
    status: str
    reason: str
    wrapper: bool = False

    def search(self, text: str) -> re.Match | None:
        return re.search(self.pattern, text, re.MULTILINE)


@dataclass(frozen=True)
class Failure:
    status: str
    reason: str
    line: str


# "... ERROR 12-06 02:15:26 [core.py:1136] ValueError: max_num_seqs (2048) exceeds ...": the
# exception's name and message, whatever the engine's log prefix.
# The name must open the line or follow the log's own prefix ("[file.py:N] ", "(Proc pid=N) "), so
# an exception quoted inside a warning's text is not taken for one raised.
_EXCEPTION_LINE = re.compile(r"^(?:.*?(?:\] |\) ))?((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): (\S.*)$",
                             re.MULTILINE)


def first_exception(log_text: str) -> str | None:
    """The first `SomeError: message` line of a log, from the exception's name on; None if none."""
    m = _EXCEPTION_LINE.search(log_text)
    return f"{m.group(1)}: {m.group(2).strip()}" if m else None
