"""Kill an engine's process group when the process that owns it dies: `python -m actors.watchdog PGID`.

Started by `EngineProcess` as a child of the owner. It polls its parent: once the parent is gone
(it is re-parented), the owner died without stopping its engine (actor killed, node agent
crashed), so it terminates the engine group, waits a grace period, and kills it. It exits by
itself when the group is gone. Linux's parent-death signal would fire when the parent *thread*
exits, and Ray runs actor methods on other threads, so polling is the robust choice.
Only the standard library is imported: this must start in milliseconds.
"""

from __future__ import annotations

import os
import signal
import sys
import time

POLL_S = 0.5


def group_exists(pgid: int) -> bool:
    """Whether group `pgid` has any process, an exited one not yet reaped (a zombie) included."""
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs. A member that exited but was not reaped yet
    counts as gone: it holds no memory, GPU or port. An engine's helper (multiprocessing's resource
    tracker, say) is re-parented to init when the engine's leader exits, and init reaps it when it
    gets to it: 1.6 s later on the CI machine, never in a container whose PID 1 reaps nothing, where
    waiting for it cost every engine stop its whole grace period."""
    if not group_exists(pgid):
        return False
    states = _group_states(pgid)
    return states is None or any(state not in ("Z", "X") for state in states)


def _group_states(pgid: int) -> list[str] | None:
    """The states of group `pgid`'s processes as /proc shows them; None where there is no /proc."""
    members = group_members(pgid)
    return None if members is None else [state for _, state in members]


def group_members(pgid: int) -> list[tuple[int, str]] | None:
    """(pid, state) of each process of group `pgid` as /proc shows them; None where there is no /proc."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    members = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:  # gone meanwhile
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid:
            members.append((int(pid), fields[0].decode()))
    return members


def watch(pgid: int, owner: int, grace_s: float) -> int:
    # The cheap check while the owner lives (this loop runs for the engine's whole life); the
    # owner stops its engine itself, and this watchdog with it.
    while group_exists(pgid):
        if os.getppid() != owner:
            try:
                os.killpg(pgid, signal.SIGTERM)
            except ProcessLookupError:
                return 0
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and group_alive(pgid):
                time.sleep(0.1)
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return 0
        time.sleep(POLL_S)
    return 0


if __name__ == "__main__":
    # argv: PGID OWNER_PID GRACE_S
    sys.exit(watch(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
