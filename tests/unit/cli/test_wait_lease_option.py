"""`farm sweep --wait-lease SECONDS` (issue 51 item 1): a resume waits, bounded, for the sweep's
other driver; a value that is not a whole number of seconds from 1 to a day, or the option where
there is no other driver to wait for, is one line naming the option, exit 2, nothing started.
The wait itself, on real drivers: tests/e2e/test_sweep_lease.py and tests/unit/store/test_sweep_lease.py."""

from __future__ import annotations

import pytest

from refusals import mock_study, refused

SWEEP = ["sweep", "--config", "s.yaml", "--grid", "g"]
RESUME = ["--resume", "0123456789abcdef"]


@pytest.mark.parametrize("value", ["0", "-5", "abc", "1.5", "86401", ""])
def test_a_wait_that_is_not_whole_seconds_up_to_a_day_is_refused(tmp_path, value):
    line = refused(tmp_path, [*SWEEP, *RESUME, "--wait-lease", value], {"s.yaml": mock_study("w")})
    assert line.startswith("--wait-lease: "), line


@pytest.mark.parametrize("extra", [[], ["--address", "http://127.0.0.1:8265", *RESUME]])
def test_a_wait_with_no_other_driver_to_wait_for_is_refused(tmp_path, extra):
    line = refused(tmp_path, [*SWEEP, *extra, "--wait-lease", "60"], {"s.yaml": mock_study("w")})
    assert line.startswith("--wait-lease: only with --resume, run from this machine"), line
