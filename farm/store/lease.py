"""One sweep, one driver: the lease a driver holds on its sweep's run while it runs the sweep.

The store is the only thing two drivers share (a SQLite file, or a tracking server), so the lease
lives there: `schema.LEASE_TAG` on the sweep's run names its holder (a random token, host, pid,
PID namespace, since when). It is renewed by the driver's heartbeat (`tracking.Heartbeat`, which
also checks at each beat that the lease is still its own) and let go when the sweep ends
(`tracking.finish_sweep`) or the driver stops on an error. A driver killed outright lets nothing
go: its lease is free once it expires (`schema.DRIVER_GONE_S` after the sweep's last heartbeat),
or at once where its holder is a dead process of this host and PID namespace.

Taking it: MLflow tags have no compare-and-set, so a free lease is taken with Fischer's timed
mutual exclusion (Lamport, "A fast mutual exclusion algorithm", 1987, after M. Fischer):

    read the lease; if it is free, write a claim (a new token) within WRITE_WITHIN_S of that
    read; wait SETTLE_S (> WRITE_WITHIN_S); read it again: the driver whose token is there has it.

Why two drivers never both win: say A and B both read the lease free and both claim, and A's
claim lands first. B read before A's claim landed (else B would have seen a fresh claim: a claim
writes the heartbeat too, so it is "held"), and B's claim lands within WRITE_WITHIN_S of B's read,
so before A's claim + WRITE_WITHIN_S < A's claim + SETTLE_S, when A reads again: A sees B's token
and backs off. B's later read sees B's (or a later claimant's, which B loses to the same way).
A driver that reads the lease after a claim landed sees it held and claims nothing. The bound is
measured, not assumed: a driver whose read and write took longer than WRITE_WITHIN_S in all takes
nothing this round (its claim may have landed late) and tries again after a pause. A late claim
that displaced a winner is what `verify` finds at the winner's next beat: that driver stops. So
a store too slow for the bound costs a retry, never two drivers.

A trial is run only by the lease's holder, so it is never run twice: the holder reads which
trials finished (`check_resume`) only once it holds the lease, and a holder killed mid-trial
loses nothing (its unfinished trial has no finished run; the next holder drops its partial runs
and runs it again).
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Callable

from farm.errors import UserError
from farm.store import location
from farm.store import schema as S
from farm.store import tracking

# Fischer's bounds (see above): a claim written within WRITE_WITHIN_S of the read that found the
# lease free (seconds of this machine's clock, read to write answered), read back SETTLE_S later.
WRITE_WITHIN_S = 3.0
SETTLE_S = 4.0
# how often a driver asked to wait (--wait-lease) reads the lease again
POLL_S = 5.0
# rounds a too-slow store may cost before the driver says so
SLOW_ROUNDS = 3


@dataclass(frozen=True)
class Holder:
    """Who holds a sweep's lease, as its tag says."""

    token: str
    host: str
    pid: int
    pid_namespace: str
    since: float

    def value(self) -> str:
        return json.dumps({"token": self.token, "host": self.host, "pid": self.pid,
                           "pid_namespace": self.pid_namespace, "since": round(self.since)}, separators=(",", ":"))

    @classmethod
    def parse(cls, raw: str) -> "Holder | None":
        """None for a released lease, none at all (a sweep stored before leases) or a value that
        is not one (no one can be shown to hold it)."""
        try:
            d = json.loads(raw)
            return cls(token=str(d["token"]), host=str(d["host"]), pid=int(d["pid"]),
                       pid_namespace=str(d.get("pid_namespace", "")), since=float(d["since"]))
        except (ValueError, TypeError, KeyError):
            return None

    def line(self, now: float, beat: float) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.since))
        return f"process {self.pid} on {self.host} since {since} (last heartbeat {max(0.0, now - beat):,.0f} s ago)"


def holder(tags: dict[str, str], now: float, host: str, namespace: str, alive: Callable[[int], bool],
           mine: frozenset[str] = frozenset()) -> tuple[Holder, float] | None:
    """(the holder, its last heartbeat) of a lease held by a driver that is not this one, or None
    where the lease is free: released or never taken, expired (no heartbeat for DRIVER_GONE_S; a
    claim counts as one), its holder a dead process of this host and PID namespace, or one of
    `mine` (this process's own claims). Pure."""
    held = Holder.parse(tags.get(S.LEASE_TAG, ""))
    if held is None or held.token in mine:
        return None
    try:
        beat = max(held.since, float(tags.get(S.HEARTBEAT_TAG) or 0))
    except ValueError:
        beat = held.since
    if held.host == host and held.pid_namespace == namespace and not alive(held.pid):
        return None
    if now - beat > S.DRIVER_GONE_S:
        return None
    return held, beat


# sweep id -> (the token of the lease this process holds on it, the store)
_HELD: dict[str, tuple[str, str]] = {}


def holds(sweep_id: str) -> bool:
    """Whether this process holds (or has taken and not let go) the sweep's lease."""
    return sweep_id in _HELD


def _tags(uri: str, sweep_id: str) -> dict[str, str] | None:
    run = tracking.get_sweep(uri, sweep_id)
    return None if run is None else dict(run.data.tags)


def _held_by(tags: dict[str, str], mine: frozenset[str] = frozenset()) -> tuple[Holder, float] | None:
    return holder(tags, time.time(), socket.gethostname(), tracking.pid_namespace(), tracking._pid_alive, mine)


def _claim_tags(token: str) -> dict[str, str]:
    """A claim: the lease and, in the same write, the driver's own tags and a heartbeat (a fresh
    claim is held, and `farm status` never takes the claimant for the dead driver before it)."""
    now = time.time()
    me = Holder(token=token, host=socket.gethostname(), pid=os.getpid(), pid_namespace=tracking.pid_namespace(),
                since=now)
    return {S.LEASE_TAG: me.value(), S.DRIVER_TAG: f"{me.host}:{me.pid}", S.DRIVER_PID_NS_TAG: me.pid_namespace,
            S.HEARTBEAT_TAG: f"{now:.0f}"}


def new_claim() -> tuple[str, dict[str, str]]:
    """(a token, the tags of its claim) for a sweep this driver is about to create: the tags go into
    the sweep run's creation (`tracking.start_sweep`), so the run never exists without its holder,
    and `hold` then records the lease as this process's."""
    token = secrets.token_hex(8)
    return token, _claim_tags(token)


def hold(uri: str, sweep_id: str, token: str) -> None:
    """The lease this process claimed in the sweep's creation (`new_claim`) is its own."""
    _HELD[sweep_id] = (token, uri)


def claim_new(uri: str, sweep_id: str) -> dict[str, str]:
    """The claim on a sweep this driver has just created, written with its first heartbeat, before
    the sweep's id is printed: no other driver has been told the id, so no race is run."""
    token = secrets.token_hex(8)
    _HELD[sweep_id] = (token, uri)
    return _claim_tags(token)


def take(uri: str, sweep_id: str, *, wait_s: float = 0.0, on_wait: Callable[[str], None] = lambda line: None) -> bool:
    """Take the sweep's lease for this process, waiting up to `wait_s` seconds for its holder to
    let it go (`on_wait`: one line, once, when it waits). A sweep the store does not have is left
    to `check_resume` to refuse. Raises UserError, one line naming the holder and since when.
    Returns whether it took the lease now: False where this process holds it already (a program
    that ran the sweep and resumes it, its heartbeat still beating) or there is none to take."""
    if holds(sweep_id) and verify(uri, sweep_id) is None:
        return False  # this process is the sweep's one driver already
    db = location.sqlite_path(uri)
    if db is not None and not db.is_file():  # opening it would create it: `check_resume` says so
        return False
    if _tags(uri, sweep_id) is None:  # also opens the store, so that the timed read below is a read
        return False
    deadline = time.monotonic() + wait_s
    mine: set[str] = set()  # tokens of this process's rounds that took nothing (a claim may have landed)
    slow = 0
    told = False
    settled = False  # the holder read once more, SETTLE_S after first seeing it, before it is named
    while True:
        started = time.monotonic()
        tags = _tags(uri, sweep_id)
        if tags is None:
            return False
        held = _held_by(tags, frozenset(mine))
        if held is None:
            token = secrets.token_hex(8)
            tracking.write_tags(uri, sweep_id, _claim_tags(token))
            took = time.monotonic() - started
            if took > WRITE_WITHIN_S:  # the bound is broken: this claim proves nothing
                mine.add(token)
                slow += 1
                if slow >= SLOW_ROUNDS:
                    raise UserError(f"the tracking store took {took:.1f} s to read and write sweep {sweep_id}'s "
                                    f"lease ({WRITE_WITHIN_S:g} s at most to take it safely), {slow} times: try "
                                    f"again when it answers faster", key="--resume")
                time.sleep(SETTLE_S)
                continue
            time.sleep(SETTLE_S)
            now_tags = _tags(uri, sweep_id) or {}
            if (Holder.parse(now_tags.get(S.LEASE_TAG, "")) or Holder("", "", 0, "", 0)).token == token:
                _HELD[sweep_id] = (token, uri)
                return True
            continue  # another driver's claim landed after this one: it holds the lease now
        who, beat = held
        waited = wait_s - (deadline - time.monotonic())
        if time.monotonic() >= deadline and not settled:
            # The claim read may be one of several written at once, not yet the one that holds (Fischer's
            # rule settles within SETTLE_S): read again then, so that a refusal names the driver that
            # holds the lease (CI, 2026-12-07: three of four contenders refused, one naming a claim that lost).
            settled = True
            time.sleep(SETTLE_S)
            continue
        if time.monotonic() >= deadline:
            line = who.line(time.time(), beat)
            if wait_s > 0:
                raise UserError(f"waited {waited:,.0f} s; sweep {sweep_id} is still run by another driver: {line}",
                                key="--wait-lease")
            raise UserError(f"sweep {sweep_id} is run by another driver: {line}; one driver a sweep: wait for it "
                            f"(--wait-lease SECONDS), or, if it is gone, its lease expires {S.DRIVER_GONE_S:g} s "
                            f"after its last heartbeat", key="--resume")
        if not told:
            on_wait(f"sweep {sweep_id} is run by another driver: {who.line(time.time(), beat)}; waiting up to "
                    f"{wait_s:,.0f} s for it to end")
            told = True
        time.sleep(max(0.0, min(POLL_S, deadline - time.monotonic())))


def verify(uri: str, sweep_id: str) -> str | None:
    """None while this process still holds the sweep's lease (or holds none to check); else one
    line saying who took it. A store that cannot be read now says nothing (the next beat asks)."""
    token = _HELD.get(sweep_id, ("", ""))[0]
    if not token:
        return None
    try:
        tags = _tags(uri, sweep_id)
    except Exception:  # noqa: BLE001 - a busy or briefly unreachable store
        return None
    if tags is None:
        return None
    now = Holder.parse(tags.get(S.LEASE_TAG, ""))
    if now is not None and now.token == token:
        return None
    who = now.line(time.time(), now.since) if now is not None else "no driver"
    return f"this driver lost sweep {sweep_id}'s lease (its store went unanswered or it was stalled for " \
           f"{S.DRIVER_GONE_S:g} s); it is now held by {who}"


def release(uri: str, sweep_id: str | None) -> None:
    """Let this process's lease on the sweep go, where it is still its own; never raises (a lease
    not let go expires)."""
    token = _HELD.pop(sweep_id or "", ("", ""))[0]
    if not token:
        return
    try:
        tags = _tags(uri, sweep_id or "") or {}
        held = Holder.parse(tags.get(S.LEASE_TAG, ""))
        if held is not None and held.token == token:
            tracking.write_tags(uri, sweep_id or "", {S.LEASE_TAG: S.LEASE_RELEASED})
    except Exception:  # noqa: BLE001 - a store gone: the lease expires
        pass


def release_unless_beating(uri: str, sweep_id: str | None) -> None:
    """At the driver's end: a sweep whose heartbeat goes on is let go by `tracking.finish_sweep`,
    once its report is stored; one without (an error before the sweep began) is let go now."""
    if sweep_id and not tracking.beating(sweep_id):
        release(uri, sweep_id)


@atexit.register
def _release_all() -> None:
    """A driver ending on an error before its sweep began lets its leases go on the way out."""
    for sweep_id, (_, uri) in list(_HELD.items()):
        release(uri, sweep_id)
