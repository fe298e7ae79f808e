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


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def watch(pgid: int, owner: int, grace_s: float) -> int:
    while group_alive(pgid):
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
