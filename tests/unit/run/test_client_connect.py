"""`farm sweep --address ray://HEAD:10001`: when the head's Ray Client proxy cannot start this
driver's server (seen in CI on a loaded head: the text below is Ray 2.x's, from that log), farm
connects again after a wait, and after the last attempt says so in one line, exit code 1.

The connection itself is a callable here: what is tested is farm's policy on Ray's error, not
Ray (tests/e2e/test_jobs_api.py connects through a real head's Ray Client)."""

from __future__ import annotations

import pytest

from farm.errors import ClusterError
from farm.run.jobs import connect_client

# ray/util/client/worker.py: _server_init, from the proxier's Datapath (CI log, 2026-12-03)
RAY_TEXT = ("Initialization failure from server:\nTraceback (most recent call last):\n  File \".../proxier.py\", "
            "line 772, in Datapath\n    raise RuntimeError(\nRuntimeError: Starting Ray client server failed. See "
            "ray_client_server_23000.err for detailed logs.\n")


class Head:
    """Answers `connect()` with Ray's server-start failure `fails` times, then a context."""

    def __init__(self, fails: int, error: Exception | None = None):
        self.fails, self.calls = fails, 0
        self.error = error or ConnectionAbortedError(RAY_TEXT)

    def __call__(self):
        self.calls += 1
        if self.calls <= self.fails:
            raise self.error
        return "context"


def test_a_server_that_fails_to_start_once_is_asked_again_after_a_wait():
    head, waited, lines = Head(fails=2), [], []
    ctx = connect_client(head, "ray://10.0.0.1:10001", waits=(2.0, 5.0), sleep=waited.append, warn=lines.append)
    assert ctx == "context" and head.calls == 3
    assert waited == [2.0, 5.0]
    assert lines == [
        "warning: --address: the head at ray://10.0.0.1:10001 could not start a Ray Client server for this driver "
        "(attempt 1 of 3); trying again in 2 s",
        "warning: --address: the head at ray://10.0.0.1:10001 could not start a Ray Client server for this driver "
        "(attempt 2 of 3); trying again in 5 s"]


def test_after_the_last_attempt_one_line_names_the_address_and_the_heads_logs():
    head = Head(fails=99)
    with pytest.raises(ClusterError) as err:
        connect_client(head, "ray://10.0.0.1:10001", waits=(2.0, 5.0), sleep=lambda s: None, warn=lambda line: None)
    assert head.calls == 3
    assert err.value.exit_code == 1  # the cluster failed, not the user's input
    line = err.value.line()
    assert "\n" not in line and line.startswith("--address: the head at ray://10.0.0.1:10001 could not start")
    assert "ray_client_server_*.err" in line


@pytest.mark.parametrize("error", [ConnectionRefusedError("connection refused"), ValueError("bad runtime_env")])
def test_any_other_failure_is_not_retried(error):
    head = Head(fails=1, error=error)
    with pytest.raises(type(error)):
        connect_client(head, "ray://10.0.0.1:10001", sleep=lambda s: pytest.fail("waited"), warn=lambda line: None)
    assert head.calls == 1
