"""A serve command pasted into `--from` or a study's `start:` (issue 51 item 5): read as a shell
reads it, its backslash-newline continuations joined; refused, whatever its size, in one short
line naming the study file and the option or key, quoting at most the first unknown flag and
counting the rest. Through the real `farm` command."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from conftest import run_farm
from farm.analysis.start_command import shell_words
from farm.inputs import joined_continuations

STUDY = {
    "name": "pasted", "primary_profile": "p",
    "models": {"tiny": {"name": "farm-tiny", "tokenizer": "farm:tiny"}},
    "engines": {"mock": {"flags": {"ttft-ms": 5}}},
    "profiles": {"p": {"data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 4}, "requests": 4}},
    "grids": {"g": {"blocks": [{"engine": "mock", "models": ["tiny"], "axes": {"itl-ms": [1, 2]}}]}},
}
HEAD = "guidellm mock-server --model farm-tiny --ttft-ms 5 --itl-ms 2"


def _study(tmp: Path, start: str | None = None) -> None:
    data = {**STUDY, **({"strategy": "local", "start": start} if start is not None else {})}
    (tmp / "s.yaml").write_text(yaml.safe_dump(data, width=10**9))


def _from(tmp: Path, command: str):
    return run_farm("sweep", "--config", "s.yaml", "--grid", "g", "--dry-run", "--strategy", "local",
                    "--from", command, cwd=tmp)


def _start(tmp: Path, command: str):
    _study(tmp, command)
    return run_farm("sweep", "--config", "s.yaml", "--grid", "g", "--dry-run", cwd=tmp)


@pytest.mark.parametrize("text, words", [
    ("a \\\nb", ["a", "b"]),                                        # a continuation joins two lines
    ("a\\\n--b", ["a--b"]),                                         # ... with nothing in between, as bash does
    ("a \\\r\n  b", ["a", "b"]),                                    # a line pasted from Windows
    ('a "x\\\ny" b', ["a", "xy", "b"]),                             # inside double quotes too
    ("a 'x\\\ny' b", ["a", "x\\\ny", "b"]),                         # not inside single quotes
    ("a \\\\\nb", ["a", "\\", "b"]),                                # an escaped backslash, then a newline
    ("a\\ b", ["a b"]),                                             # other escapes as shlex reads them
])
def test_a_command_is_split_as_a_shell_splits_it(text, words):
    assert shell_words(text) == words
    assert shlex.split(joined_continuations(text)) == words


def test_a_pasted_multi_line_command_starts_the_search_from_its_trial(tmp_path):
    pasted = "guidellm mock-server \\\n  --model farm-tiny \\\n  --ttft-ms 5 \\\n  --itl-ms 1\n"
    _study(tmp_path)
    out = _from(tmp_path, pasted)
    assert out.returncode == 0, out.stderr
    assert "strategy local from itl-ms=1" in out.stdout
    out = _start(tmp_path, pasted)  # the study's `start:` as a YAML block, as pasted
    assert out.returncode == 0, out.stderr
    assert "strategy local from itl-ms=1" in out.stdout


@pytest.mark.parametrize("flags", [1, 600, 5000])
def test_unknown_flags_are_one_short_line_naming_the_study_and_the_key(tmp_path, flags):
    command = HEAD + " \\\n " + " \\\n ".join(f"--bogus-{i} {i}" for i in range(flags))
    more = f" and {flags - 1:,} other unknown flags" if flags > 1 else ""
    expected = (f"mock takes no flag '--bogus-0'{more} (its --help: farm/engines/facts/mock-0.8.1-help.txt)")
    out = _start(tmp_path, command)  # 5000 flags: about 100 kB in the study
    assert out.returncode == 2 and out.stderr.splitlines() == [f"error: s.yaml: start: {expected}"], out.stderr[:500]
    if len(command) <= 8192:  # what --from takes on the command line
        _study(tmp_path)
        out = _from(tmp_path, command)
        assert out.returncode == 2 and out.stderr.splitlines() == [f"error: s.yaml: --from: {expected}"]


def test_a_command_longer_than_the_option_takes_is_one_short_line(tmp_path):
    _study(tmp_path)
    out = _from(tmp_path, HEAD + " " + " ".join(f"--x{i} 1" for i in range(9000)))  # ~100 kB
    assert out.returncode == 2
    (line,) = out.stderr.splitlines()
    assert line.startswith("error: --from: expected a command or a trial of at most 8192 characters, got ")
    assert len(line) < 200


@pytest.mark.parametrize("command, words", [
    # a newline the shell would end the command at (no backslash), in the middle of a word list
    (HEAD + "\n--bogus 1", "expected a command or a trial of one line, got"),
    # a launcher the grid's engines do not have: quoted short, not the whole command
    ("x" * 5000 + " serve m", "not a serve command of an engine of grid 'g' (it starts with 'xxxx"),
    # an unclosed quote: the reason and the command's length, not its text
    (HEAD + " --itl-ms '" + "z" * 5000, "cannot split the command (No closing quotation: 5,"),
])
def test_other_unreadable_commands_are_one_short_line(tmp_path, command, words):
    _study(tmp_path)
    out = _from(tmp_path, command)
    assert out.returncode == 2
    (line,) = out.stderr.splitlines()
    assert words in line and len(line) < 400, line
    assert line.startswith("error: s.yaml: --from: ") or line.startswith("error: --from: ")
