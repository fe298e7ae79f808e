"""A sweep's driver on its sweep's run: the heartbeat (`Heartbeat`, `driver_beat`) that renews its
lease (farm/store/lease.py, handed in), `LeaseLost` and `check_lease` before a trial starts, and how
a sweep whose driver is gone is told and marked interrupted (`driver_gone`, `interruption`).
`farm.store.tracking` re-exports every name here, where callers import them."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from mlflow.entities import RunTag

from farm.store import schema as S
from farm.store.mlflow_client import client


def driver_beat(uri: str, sweep_id: str, *, start: bool = False, claim: dict[str, str] | None = None) -> None:
    """The driver's heartbeat on its sweep's run (and, at `start`, where the driver runs, with the
    `claim` of a new sweep's lease, farm/store/lease.py). A missed beat is harmless (six are missed
    before the sweep is taken for interrupted, or its lease for expired)."""
    import socket

    tags = [RunTag(S.HEARTBEAT_TAG, f"{time.time():.0f}")]
    if start:
        tags += [RunTag(S.DRIVER_TAG, f"{socket.gethostname()}:{os.getpid()}"), RunTag(S.DRIVER_PID_NS_TAG, pid_namespace())]
        tags += [RunTag(S.LEASE_TAG, (claim or {})[S.LEASE_TAG])] if claim else []
    try:
        client(uri).log_batch(sweep_id, tags=tags)
    except Exception:  # a busy or briefly unreachable store: the next beat tries again
        if start:
            raise


class Heartbeat:
    """Beats every `S.DRIVER_HEARTBEAT_S` in a daemon thread while a driver runs its sweep, until
    `finish_sweep` ends the sweep (its report included) or the driver stops it on an error.

    The beats renew the driver's lease on its sweep (farm/store/lease.py: taken before a resumed
    sweep is read; a new sweep's is claimed with the first beat). Each beat first checks the lease
    is still this driver's: one taken by another driver (this one stalled past its expiry) ends
    the beats and interrupts the driver (`on_lost`; the main thread's KeyboardInterrupt by
    default), whose trials stop; `finish_sweep` then writes nothing and says who holds it."""

    def __init__(self, uri: str, sweep_id: str, on_lost=None, *, lease=None):
        """`lease`: farm/store/lease.py (the driver hands it in: the lease reads and writes through
        farm.store.tracking, which imports this module, so neither imports it); None: beats without a lease."""
        import _thread

        self.uri, self.sweep_id, self.lost, self.lease = uri, sweep_id, None, lease
        main = threading.current_thread() is threading.main_thread()
        self._on_lost = on_lost or (_thread.interrupt_main if main else (lambda: None))
        claim = None if lease is None or lease.holds(sweep_id) else lease.claim_new(uri, sweep_id)
        driver_beat(uri, sweep_id, start=True, claim=claim)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(uri, sweep_id), name="farm-heartbeat", daemon=True)
        self._thread.start()
        _BEATING[sweep_id] = self

    def _run(self, uri: str, sweep_id: str) -> None:
        while not self._stop.wait(S.DRIVER_HEARTBEAT_S):
            self.beat()

    def beat(self) -> None:
        """One beat: the lease checked, then renewed."""
        if self.lease is not None and (lost := self.lease.verify(self.uri, self.sweep_id)) is not None:
            self.lost = lost
            self._stop.set()
            self._on_lost()
            return
        driver_beat(self.uri, self.sweep_id)

    def check(self) -> None:
        """The lease checked now, between beats: raises `LeaseLost` where another driver took it
        since the last beat, so that a displaced driver starts no trial in the up to
        `S.DRIVER_HEARTBEAT_S` before its next beat would have found it out."""
        if self.lost is None and self.lease is not None:
            self.lost = self.lease.verify(self.uri, self.sweep_id)
        if self.lost is not None:
            self._stop.set()
            raise LeaseLost(self.lost)

    def stop(self, release: bool = True) -> None:
        """The beats end; the lease is let go unless `release` is False (`finish_sweep` lets it go
        once the sweep's end is stored)."""
        self._stop.set()
        if self._thread is not threading.current_thread():  # not from its own beat
            self._thread.join(timeout=5)
        if _BEATING.get(self.sweep_id) is self:
            del _BEATING[self.sweep_id]
        if release and self.lease is not None:
            self.lease.release(self.uri, self.sweep_id)


_BEATING: dict[str, Heartbeat] = {}  # sweep id -> its driver's heartbeat, in this process


class LeaseLost(KeyboardInterrupt):
    """This driver's lease on its sweep was taken by another driver: it stops as an interrupted
    driver does (its trials stopped; `finish_sweep` then writes nothing and says who holds it)."""


def check_lease(sweep_id: str) -> None:
    """Before a trial starts: raises `LeaseLost` where this process's driver of the sweep lost its
    lease (`Heartbeat.check`); nothing where it holds it, or beats no lease here."""
    if (beat := _BEATING.get(sweep_id)) is not None:
        beat.check()


def beating(sweep_id: str) -> bool:
    """Whether this process's driver of the sweep beats (its sweep not yet ended)."""
    return sweep_id in _BEATING


def pid_namespace() -> str:
    """This process's PID namespace ("" where /proc does not say)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def driver_gone(tags: dict[str, str], now: float, host: str, alive, namespace: str = "") -> str | None:
    """Why a sweep's run still "running" has no driver any more, or None while it may have one.
    `host`, `namespace`: this machine's name and PID namespace (a driver's pid is asked only
    within both); `alive(pid)`: whether a process here is alive. Pure: a run stored before drivers
    beat (no heartbeat) is never judged."""
    if tags.get(S.STATUS_TAG) != S.SWEEP_RUNNING or S.HEARTBEAT_TAG not in tags:
        return None
    try:
        beat = float(tags[S.HEARTBEAT_TAG])
    except ValueError:
        return None
    driver = tags.get(S.DRIVER_TAG, "")
    where, _, pid = driver.rpartition(":")
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(beat))
    same_space = tags.get(S.DRIVER_PID_NS_TAG, "") == namespace
    if where == host and same_space and pid.isdigit() and not alive(int(pid)):
        return f"its driver (process {pid} on {host}) is gone; last heartbeat {since}"
    if now - beat > S.DRIVER_GONE_S:
        return (f"its driver ({driver or 'unknown'}) sent no heartbeat for {now - beat:,.0f} s "
                f"(since {since}; one every {S.DRIVER_HEARTBEAT_S:g} s while it runs)")
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    try:  # a zombie (killed, not yet reaped by its parent) is gone
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def interruption(uri: str, run) -> tuple[str, str] | None:
    """(why, the command the sweep ran) for a sweep interrupted without its driver marking it: one
    marked so earlier, or one still "running" whose driver is gone, which is marked here (status
    tag `interrupted`, MLflow status KILLED, the reason), so that the MLflow UI shows it too. A store
    that cannot be written (read-only media) is not written: the answer is the same."""
    import socket

    tags = run.data.tags
    command = run.data.params.get("command", "")
    if tags.get(S.STATUS_TAG) == S.SWEEP_INTERRUPTED:
        return tags.get(S.INTERRUPTED_TAG, "its driver is gone"), command
    why = driver_gone(tags, time.time(), socket.gethostname(), _pid_alive, pid_namespace())
    if why is None:
        return None
    try:
        c = client(uri)
        c.log_batch(run.info.run_id, tags=[RunTag(S.STATUS_TAG, S.SWEEP_INTERRUPTED), RunTag(S.INTERRUPTED_TAG, why)])
        c.set_terminated(run.info.run_id, status=S.SWEEP_END_STATUS[S.SWEEP_INTERRUPTED])
    except Exception:  # a store this command may only read: reported as interrupted all the same
        pass
    return why, command
