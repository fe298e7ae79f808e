"""How a run, a trial and an attempt end: the rules that turn what happened into a status (pure).

The actor on the node (actors/bench.py) and the driver (farm/run/driver.py) only gather facts (the
client timed out, the engine exited, the report's numbers, the kind of error Ray raised) and ask
this module what they mean. Everything here is a function of its arguments, testable without
Ray, an engine or guidellm.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Iterable

from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.study.trial import Trial

if TYPE_CHECKING:
    from farm.engines.base import Failure
    from farm.study.spec import ProfileSpec

# --------------------------------------------------------------------------------------
# retries and resume

# Failures that a second attempt (elsewhere) can fix: the actor or its node went away, another
# process took the engine's port between choosing and binding it, or the benchmark client lost
# its connection to an engine that is still running. Everything else (a refused flag, OOM, a
# crash under load, a time limit) would fail the same way again: recorded once, never retried.
TRANSIENT = frozenset({Status.node_lost, Status.port_in_use, Status.connection_error})
# A trial with one of these has a final answer; resume does not run it again. A transient
# failure that used up its retries is not final: a resumed sweep tries it once more.
FINISHED = frozenset(Status) - TRANSIENT - {Status.cancelled}


# Finished without runs of their own, and not failures: what they would measure means nothing here
# (not_measurable), or is a measured trial's already (same_server). Their reason says which.
NOT_MEASURED = frozenset({Status.not_measurable, Status.same_server})


def should_retry(status: Status, attempt: int, max_retries: int) -> bool:
    """Whether the driver starts attempt `attempt + 1` of a trial that ended with `status`."""
    return status in TRANSIENT and attempt <= max_retries


def logged_by_actor(status: Status) -> bool:
    """Whether the actor stores its result itself. A transient failure may be retried (the driver
    asks for it to be stored only when it is the last word); a cancelled trial is never stored,
    so that a resumed sweep runs it again."""
    return status not in TRANSIENT and status != Status.cancelled


# --------------------------------------------------------------------------------------
# one benchmark run

# Room beyond a profile's own time limit for guidellm's start and its report.
CLIENT_GRACE_S = 120
# A profile without a time limit still gets one: a hung client must not hold a node for ever.
DEFAULT_MAX_SECONDS = 3600

# How the benchmark client reports that it could not talk to the engine (httpx and asyncio
# wording). With the engine still alive, that is a network hiccup a second attempt can survive.
CONNECTION_ERRORS = ("ConnectError", "ConnectTimeout", "RemoteProtocolError", "Connection refused",
                     "ConnectionRefusedError", "ConnectionResetError", "Connection reset by peer")

# A run with one of these leaves no engine to run the trial's other profiles on.
STOPS_TRIAL = frozenset({Status.engine_crashed, Status.oom})

# A trial's status is the most serious of its runs' statuses, in this order.
SEVERITY = (Status.engine_crashed, Status.oom, Status.timeout, Status.connection_error, Status.bench_failed,
            Status.low_success_rate)


def lost_by_client_only(run: ProfileRun) -> bool:
    """A run failed for its success rate by requests the client sent and never accounted for, and by
    nothing else: no request errored or came back incomplete, and the rest succeeded. guidellm 0.8.1
    can end a `max_requests` run before the last response's update reaches its scheduler (the
    server answered it with 200): on a busy 2-core machine, 1 of 8 requests, in about one run of
    fifty. A client's race, not the engine's doing: the run is run once more (actors/bench.py), the
    lost attempt kept and said, never counted as a success."""
    m = run.metrics
    if run.status != Status.low_success_rate or m is None or m.client_lost_requests < 1:
        return False
    served = m.success_rate * m.total_requests  # over the requests sent (parse_benchmark)
    return m.errored_requests == 0 and m.incomplete_requests == 0 and served + m.client_lost_requests >= m.total_requests - 0.5


def client_timeout_s(profile: "ProfileSpec") -> float:
    """The hard limit on one guidellm run of `profile` (warm-up runs included)."""
    return (profile.max_seconds or DEFAULT_MAX_SECONDS) + CLIENT_GRACE_S


def success_floor(profile: "ProfileSpec", study_floor: float) -> float:
    """The success rate a run of `profile` must reach. A profile's SLO may set its own floor (a
    64-request CI profile cannot demand 99 %: one request still in flight when guidellm stops is
    already 1.6 %)."""
    if profile.slo and profile.slo.min_success_rate is not None:
        return profile.slo.min_success_rate
    return study_floor


def engine_failure(classified: "Failure | None", default: Status, default_reason: str) -> tuple[Status, str]:
    """What the engine's log says of its failure (the engine's own patterns), or `default`."""
    if classified is not None:
        return Status(classified.status), f"{classified.reason}: {classified.line}"
    return default, default_reason


def crashed_during_run(classified: "Failure | None", exit_code: int | None) -> tuple[Status, str]:
    """The engine died while a benchmark ran against it. Its log may name the cause (OOM), but a
    served engine cannot have refused its flags nor lost its port: whatever such a line says
    (a flag warning printed at start), the run saw a crash."""
    status, reason = engine_failure(classified, Status.engine_crashed,
                                    f"engine exited with code {exit_code} during the run")
    if status in (Status.invalid_flags, Status.port_in_use):
        status = Status.engine_crashed
    return status, reason


@dataclass(frozen=True)
class RunFacts:
    """What the actor saw of one benchmark run of a profile."""

    requests: int                        # requests the profile asked for
    max_seconds: float | None            # the profile's own time limit
    timeout_s: float                     # the hard limit the client ran under (`client_timeout_s`)
    min_success_rate: float              # `success_floor` of the profile
    client_timed_out: bool = False       # the client ran past `timeout_s` and was stopped
    engine_died: bool = False            # the engine was gone when the client ended
    engine_exit: int | None = None       # its exit code
    engine_failure: "Failure | None" = None  # what the engine's log patterns say of its end
    metrics: RunMetrics | None = None    # the parsed report; None when there was none to parse
    report_error: str | None = None      # why the report could not be read
    client_exit: int | None = None       # the client's exit code
    client_log: str = ""                 # the last lines of the client's own log
    stopped_by_time_limit: bool = False  # guidellm's max_duration constraint ended the run


def judge_run(facts: RunFacts) -> tuple[Status, str | None]:
    """The status of one benchmark run and why; (ok, None) for a good one."""
    if facts.client_timed_out:
        return Status.timeout, f"ran past {facts.timeout_s:.0f} s"
    if facts.engine_died:
        return crashed_during_run(facts.engine_failure, facts.engine_exit)
    if facts.metrics is None:
        lost = next((m for m in CONNECTION_ERRORS if m in facts.client_log), None)
        last = " | ".join(facts.client_log.splitlines()[-3:])
        reason = (f"guidellm failed (exit {facts.client_exit}): {facts.report_error}; "
                  + (f"it lost its connection to the running engine ({lost}); " if lost else "") + last)
        return (Status.connection_error if lost else Status.bench_failed), reason
    m = facts.metrics
    done = m.successful_requests + m.errored_requests
    if facts.stopped_by_time_limit and done < facts.requests:
        # guidellm's max_duration constraint ended the run: the profile ran past its limit.
        return Status.timeout, (f"ran past its limit of {facts.max_seconds:g} s: {done:.0f} of {facts.requests} "
                                f"requests finished ({m.successful_requests:.0f} succeeded)")
    if m.success_rate < facts.min_success_rate:
        # over the requests sent: a request the client lost track of is not a success (issue 45)
        lost = (f"; {m.client_lost_requests:.0f} sent and never accounted for by the client (lost)"
                if m.client_lost_requests else "")
        return Status.low_success_rate, (f"{m.successful_requests:.0f} of {m.total_requests:.0f} requests succeeded "
                                         f"({m.success_rate:.1%} < {facts.min_success_rate:.0%}){lost}")
    return Status.ok, None


# --------------------------------------------------------------------------------------
# one trial


def trial_status(runs: Iterable[ProfileRun]) -> tuple[Status, str | None]:
    """The trial's status: the most serious of its runs' statuses (`SEVERITY`), with that run's reason."""
    runs = list(runs)
    for status in SEVERITY:
        for run in runs:
            if run.status == status:
                return status, f"{run.profile}#{run.repeat}: {run.reason}"
    return Status.ok, None


CANCELLED_REASON = "stopped before it finished (the sweep was interrupted)"

# Failures the engine's own log explains: the sweep shows its last lines (for the others, the
# reason says it all and the log's end is farm stopping a healthy engine).
LOG_EXPLAINS = frozenset({Status.invalid_flags, Status.oom, Status.engine_crashed, Status.engine_failed_to_start,
                          Status.port_in_use})


# --------------------------------------------------------------------------------------
# a trial whose actor gave no result back


class Lost(str, Enum):
    """Why the driver has no result from a trial's actor."""

    actor = "actor"        # the actor or its node died
    not_stored = "stored"  # the trial ran but its result could not be stored in MLflow
    farm = "farm"          # farm's own code failed inside the actor


# How much of Ray's account of a lost actor a trial's reason keeps (its attempt line keeps 1,000 characters).
LOST_DETAIL_CHARS = 600


def lost_actor_detail(kind: str, text: str) -> str:
    """`kind: what Ray says` of an actor that gave no result: Ray's first line and, for an actor whose
    process ended, Ray's account of why (`... Worker exit type: SYSTEM_ERROR Worker exit detail: ...`:
    killed for memory, a crash, the node gone), which the first line alone ("The actor died
    unexpectedly before finishing this task.") never says. The fields Ray lists between them (the
    actor's class, id, pid, name, namespace, address) are left out: the result has the node already."""
    detail = " ".join(" ".join(line.split()) for line in text.splitlines()
                      if line.strip() and not line.startswith("\t"))
    if len(detail) > LOST_DETAIL_CHARS:
        detail = detail[:LOST_DETAIL_CHARS - 3].rstrip() + "..."
    return f"{kind}: {detail}"


_LOST_STATUS = {Lost.actor: Status.node_lost, Lost.not_stored: Status.connection_error, Lost.farm: Status.bench_failed}


def lost_actor_result(*, sweep_id: str, trial: Trial, attempt: int, previous_attempts: list[str], node_id: str | None,
                      lost: Lost, detail: str, now: float | None = None) -> TrialResult:
    """The result the driver records for a trial whose actor gave none back (`trial` with its
    secrets already masked). A lost actor or node and an unstored result are transient (retried);
    farm failing on the node is not: it would fail the same way again."""
    status = _LOST_STATUS[lost]
    reason = {Lost.actor: f"actor or node lost: {detail}", Lost.not_stored: detail,
              Lost.farm: f"farm failed on the node: {detail}"}[lost]
    now = time.time() if now is None else now
    return TrialResult(sweep_id=sweep_id, trial=trial, status=status, reason=reason, attempt=attempt, node_id=node_id,
                       previous_attempts=list(previous_attempts), started_at=now, finished_at=now)


# --------------------------------------------------------------------------------------
# a trial farm does not start: what it would measure means nothing on these weights


def not_measurable_reason(output_dependent: list[str]) -> str | None:
    """Why a dummy-weights trial with these output-dependent flags is not run, or None.

    On random weights every draft token of speculative decoding is rejected (the H200's MTP trial
    logged `Accepted: 0 tokens` in all 74 of its acceptance lines and drafted for 18 minutes): its
    speed is drafting overhead no real checkpoint has, and farm would never recommend it."""
    if not output_dependent:
        return None
    flags = ", ".join("--" + f for f in output_dependent)
    return (f"not measurable on dummy weights: with {flags} the speed depends on what the model outputs (accepted "
            f"draft tokens), and random weights reject every draft token; measure it with the real checkpoint "
            f"(or set dummy_output_dependent: speed in the study for one short run of its drafting overhead)")


def trial_not_measurable(trial: Trial) -> str | None:
    """Why farm does not start this trial (dummy weights with output-dependent flags), or None."""
    if trial.weights != "dummy":
        return None
    from farm.engines import get_engine  # the engine knows which of its flags depend on the output

    return not_measurable_reason(get_engine(trial.engine).output_dependent(trial.all_flags))


def not_measurable_result(*, sweep_id: str, trial: Trial, reason: str, now: float | None = None) -> TrialResult:
    """The record of a trial that was not started (`trial` with its secrets already masked)."""
    now = time.time() if now is None else now
    return TrialResult(sweep_id=sweep_id, trial=trial, status=Status.not_measurable, reason=reason,
                       started_at=now, finished_at=now)
