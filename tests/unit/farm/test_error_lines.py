"""Every user error is one line and bounded, whatever it quotes (issue 51 item 5): newlines, tabs,
terminal escapes and lone surrogates escaped, the line cut at `MAX_LINE_CHARS` with the length it
had, so a pasted file or command never floods a terminal; a short line is left as it was."""

from __future__ import annotations

import pytest

from farm.errors import MAX_LINE_CHARS, SpecError, UserError, bounded_line


@pytest.mark.parametrize("reason", [
    "x" * 100_000,                                   # a pasted command
    "first line\nsecond line\r\nthird",              # a pasted file's lines
    "--flag \\\n  --other 1",                        # a continuation left in
    "bell\x07 escape\x1b[2J clear\x00nul\ttab",      # terminal control
    "lone \udc80 surrogate",                         # a mis-decoded file name
    "\n" * 50_000,                                   # escaping doubles the length: still bounded
    "é ü 中文 emoji 🙂",                             # printable text stays as it is
])
@pytest.mark.parametrize("error", [UserError, SpecError])
def test_an_error_line_is_one_printable_bounded_line(error, reason):
    line = error(reason, file="study.yaml", key="start").line()
    assert line.isprintable() and len(line) <= MAX_LINE_CHARS
    assert line.startswith("study.yaml: start: ")
    assert str(error(reason, file="study.yaml", key="start")) == line  # what a traceback or a log shows too


def test_a_cut_line_says_how_long_it_was():
    line = UserError("y" * 100_000, key="--from").line()
    assert line.endswith("... (100,008 characters in all)") and line.startswith("--from: yyy")
    assert len(line) == MAX_LINE_CHARS


@pytest.mark.parametrize("text", ["unknown key", "a: b: c", "é 中文", "x" * MAX_LINE_CHARS])
def test_a_short_printable_line_is_left_as_it_was(text):
    assert bounded_line(text) == text


def test_escapes_are_the_ones_python_writes():
    assert bounded_line("a\nb\tc\x1b") == "a\\nb\\tc\\x1b"
