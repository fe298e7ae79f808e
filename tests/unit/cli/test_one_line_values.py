"""Text that is not printable in one line is refused in one line (issue 29): an option value with a
newline or a control character (`--trial`, `--config` given a file's text instead of its path), a
name in a study or results file with a control character or a lone surrogate escape. The error
quotes the value shortened and escaped, so the error itself stays one line a terminal shows."""

from __future__ import annotations

import pytest

from refusals import mock_study, refused

STUDY = mock_study("lines")
DRY = ["sweep", "--config", "s.yaml", "--grid", "g", "--dry-run"]

OPTIONS = [
    ("trial-with-a-newline", DRY + ["--trial", "a\nb"],
     "--trial: expected a name of one line, got 'a\\nb' (control characters or invalid text)"),
    ("config-given-the-file-text", ["sweep", "--config", STUDY, "--grid", "g", "--dry-run"],
     "--config: expected a file path of one line, got 'name: lines\\nprimary_profile: p\\nmodels: {...' (control "
     "characters or invalid text; a file's text where its path belongs?)"),
    ("grid-with-a-terminal-escape", ["sweep", "--config", "s.yaml", "--grid", "g\x1b[31m", "--dry-run"],
     "--grid: expected a name of one line, got 'g\\x1b[31m' (control characters or invalid text)"),
    ("results-path-with-a-tab", ["analyze", "--results", "r.json\tx"],
     "--results: expected a file path of one line, got 'r.json\\tx' (control characters or invalid text)"),
    ("resume-with-a-newline", DRY + ["--resume", "ab\ncd"],
     "--resume: 'ab\\ncd' is not a sweep id (the run id farm printed: letters, digits, - and _)"),
    ("sweep-id-with-a-newline", ["report", "a\nb"],
     "SWEEP_ID: 'a\\nb' is not a sweep id (the run id farm printed: letters, digits, - and _)"),
    ("address-with-a-newline", DRY + ["--address", "head\n:6379"],
     "--address: 'head\\n:6379' is not a Ray address (HOST:PORT, ray://HOST:PORT, http://HEAD:8265 or auto)"),
    ("server-host-with-a-carriage-return", ["server", "--host", "a\rb"],
     "--host: 'a\\rb' is not a host name or IP address (in 'a\\rb')"),
    ("server-allowed-hosts-with-a-newline", ["server", "--allowed-hosts", "a.example,\nb.example"],
     "--allowed-hosts: expected a list of hosts of one line, got 'a.example,\\nb.example' (control characters or "
     "invalid text)"),
    ("workdir-with-a-newline", DRY + ["--workdir", "runs\nx"],
     "--workdir: expected a directory path of one line, got 'runs\\nx' (control characters or invalid text)"),
]


@pytest.mark.parametrize("args,expected", [c[1:] for c in OPTIONS], ids=[c[0] for c in OPTIONS])
def test_an_option_value_of_more_than_one_line_is_refused_in_one_line(tmp_path, args, expected):
    assert refused(tmp_path, args, {"s.yaml": STUDY}) == expected


def test_a_long_value_is_quoted_shortened(tmp_path):
    line = refused(tmp_path, DRY + ["--trial", "x" * 500 + "\n"], {"s.yaml": STUDY})
    assert line == f"--trial: expected a name of one line, got '{'x' * 40}...' (control characters or invalid text)"


FILES = [
    ("study-name-with-a-lone-surrogate", {"s.yaml": STUDY.replace("name: lines", 'name: "li\\ud800nes"')}, DRY,
     "s.yaml: name: 'li\\ud800nes' holds a lone surrogate escape, which is not text (no UTF-8 for it)"),
    ("model-key-with-a-lone-surrogate", {"s.yaml": STUDY.replace("{tiny:", '{"ti\\udc80ny":')}, DRY,
     "s.yaml: models: the key 'ti\\udc80ny' is not a name of one line (control characters or invalid text)"),
    ("profile-key-with-a-newline", {"s.yaml": STUDY.replace("profiles: {p:", 'profiles: {"p\\nq":')}, DRY,
     "s.yaml: profiles: the key 'p\\nq' is not a name of one line (control characters or invalid text)"),
    ("results-key-with-a-lone-surrogate", {"r.json": '{"profiles": {"p\\ud800": {}}, "runs": []}'},
     ["analyze", "--results", "r.json"],
     "r.json: profiles: the key 'p\\ud800' is not a name of one line (control characters or invalid text)"),
    ("results-value-with-a-lone-surrogate", {"r.json": '{"profiles": {}, "runs": [], "study": "s\\udfff"}'},
     ["analyze", "--results", "r.json"],
     "r.json: study: 's\\udfff' holds a lone surrogate escape, which is not text (no UTF-8 for it)"),
]


@pytest.mark.parametrize("files,args,expected", [c[1:] for c in FILES], ids=[c[0] for c in FILES])
def test_a_name_in_a_file_that_is_not_one_line_of_text_is_refused(tmp_path, files, args, expected):
    assert refused(tmp_path, args, files) == expected
