"""`farm sweep --resume ID --control TRIAL` (issue 45, machines as blocks): where the option cannot
apply, one line naming it, exit 2, nothing started or written. What it does, on real sweeps over
two labelled machines: tests/e2e/test_resume_control.py."""

from __future__ import annotations

import pytest

from refusals import mock_study, refused

SWEEP = ["sweep", "--config", "s.yaml", "--grid", "g"]
RESUME = ["--resume", "0123456789abcdef0123456789abcdef"]
STUDY = mock_study("c").replace("{engine: mock, models: [tiny]}", "{name: a, engine: mock, models: [tiny]}")


def test_a_control_without_a_resume_is_refused(tmp_path):
    line = refused(tmp_path, [*SWEEP, "--control", "a"], {"s.yaml": STUDY})
    assert line.startswith("--control: only with --resume: it runs again a trial the sweep has measured"), line


def test_a_control_the_grid_does_not_have_is_refused(tmp_path):
    line = refused(tmp_path, [*SWEEP, *RESUME, "--control", "nosuch"], {"s.yaml": STUDY})
    assert line.startswith("--control: no trial 'nosuch' in this grid (it has: a"), line


@pytest.mark.parametrize("extra, says", [
    (["--strategy", "halving", "--budget", "1"], "--control: only for a grid sweep; a "),
    (["--address", "http://127.0.0.1:8265"], "--control: runs part of a sweep from this machine; it does not "
                                             "combine with --address http://..."),
])
def test_a_control_where_the_sweep_runs_its_own_or_runs_elsewhere_is_refused(tmp_path, extra, says):
    line = refused(tmp_path, [*SWEEP, *RESUME, *extra, "--control", "a"], {"s.yaml": STUDY})
    assert line.startswith(says), line
