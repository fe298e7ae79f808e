"""guidellm benchmarks in this process, from JSON scenario specs.

    python -m actors.guidellm_worker SPEC          # one benchmark, then exit
    python -m actors.guidellm_worker --serve FD    # one benchmark per line of stdin, replies on FD

farm runs guidellm's Python API in a child process, not the `guidellm run` CLI: a separate
process keeps guidellm's event-loop policy and worker processes out of the Ray actor and lets the
actor enforce a hard time limit by killing one process group. With `--serve`, one process serves
every run of a trial: importing guidellm (torch, transformers) costs 5 s of CPU, and guidellm's
own worker processes, started from a forkserver that has their part of guidellm loaded, start in a
fraction of a second instead of importing it again, run after run. A request line is JSON
`{"spec": PATH, "log": PATH}`; the reply is `{"rc": N}`, after the run's output went to its log.
guidellm's spawned workers re-import this module as `__mp_main__`, so nothing heavy is imported
at top level.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import traceback

# Settings guidellm reads at import time: few workers on small machines, a short start delay.
os.environ.setdefault("GUIDELLM__MAX_WORKER_PROCESSES", "2")
os.environ.setdefault("GUIDELLM__SCHEDULER_START_DELAY_NON_DISTRIBUTED", "0.2")
# How often guidellm's scheduler looks at its barriers, events and queues (0.1 s by its default).
# A run's start (the workers' barrier) and end (shutdown event, queues drained, workers joined)
# each wait out a poll; a request's own path is a blocking get, not a poll, so what is measured
# does not change. bench/overhead.py, smoke study, 1 in flight: client overhead a run (median)
# 0.77-0.79 s at 0.1 -> 0.52-0.53 s at 0.02, the sweep 52-53 s -> 49-50 s.
os.environ.setdefault("GUIDELLM__MP_POLL_INTERVAL", "0.02")

# What guidellm's worker processes need, loaded once in the forkserver they are forked from: its
# scheduler, backends and schemas, not its data stack (guidellm.benchmark imports transformers and
# torch; the data loader runs in this process). A forkserver without them is ready in a second
# rather than 3.6 s, and forks a run's manager and workers in 0.14 s rather than 0.48 s.
FORKSERVER_PRELOAD = ["guidellm.scheduler", "guidellm.backends", "guidellm.schemas"]


def run_spec(path: str) -> int:
    # guidellm after the settings above, and only in this child: its spawned workers re-import
    # the main module, so a top-level import would multiply (DESIGN.md, guidellm facts).
    from guidellm.benchmark import benchmark_generative_text
    from guidellm.schemas.benchmark.entrypoints import BenchmarkScenario

    with open(path) as fh:
        spec = json.load(fh)
    args = BenchmarkScenario.create(scenario=None, spec=spec)
    asyncio.run(benchmark_generative_text(args=args, progress=False, console=None))
    return 0


def to_log(path: str) -> None:
    """This run's output (and guidellm's, and its workers' that this process starts) goes to `path`."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def start_forkserver() -> None:
    """guidellm's worker processes from a forkserver that has their part of guidellm loaded."""
    import multiprocessing

    from multiprocessing import forkserver

    os.environ["GUIDELLM__MP_CONTEXT_TYPE"] = "forkserver"
    multiprocessing.set_forkserver_preload(FORKSERVER_PRELOAD)
    forkserver.ensure_running()


def serve_requests(requests, reply) -> int:
    """One run per request line of `requests`, each reply a line on `reply`, until `requests` ends."""
    for line in requests:
        request = json.loads(line)
        to_log(request["log"])
        try:
            rc = run_spec(request["spec"])
        except BaseException:  # noqa: BLE001 - a failed run is reported; the next one may succeed
            traceback.print_exc()
            rc = 1
        sys.stdout.flush()
        sys.stderr.flush()
        reply.write(json.dumps({"rc": rc}) + "\n")
        reply.flush()
    return 0


def serve(reply_fd: int) -> int:
    # Start the forkserver, then load guidellm here, before the first request: the actor starts
    # this process beside the engine, so the imports overlap the engine's start instead of a run.
    # The forkserver imports its preload by itself, beside this process's own import of guidellm
    # rather than after it: a run's first worker waits for the forkserver's imports.
    start_forkserver()
    import guidellm.benchmark  # noqa: F401
    with os.fdopen(reply_fd, "w", buffering=1) as reply:
        return serve_requests(sys.stdin, reply)


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == "--serve":
        return serve(int(argv[2]))
    return run_spec(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
