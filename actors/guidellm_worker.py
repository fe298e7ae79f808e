"""Run one guidellm benchmark in this process from a JSON scenario spec: `python -m actors.guidellm_worker SPEC`.

farm starts this as a child process per benchmark run, not the `guidellm run` CLI: called
in-process, guidellm's fixed overhead falls from about 17 s to about 2 s on 2 cores, and a
separate process keeps guidellm's event-loop policy and worker processes out of the Ray actor
and lets the actor enforce a hard time limit by killing one process group. guidellm's spawned
workers re-import this module as `__mp_main__`, so nothing heavy is imported at top level.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

# Settings guidellm reads at import time: few workers on small machines, a short start delay.
os.environ.setdefault("GUIDELLM__MAX_WORKER_PROCESSES", "2")
os.environ.setdefault("GUIDELLM__SCHEDULER_START_DELAY_NON_DISTRIBUTED", "0.2")


def main(argv: list[str]) -> int:
    # guidellm after the settings above, and only in this child: its spawned workers re-import
    # the main module, so a top-level import would multiply (DESIGN.md, guidellm facts).
    from guidellm.benchmark import benchmark_generative_text
    from guidellm.schemas.benchmark.entrypoints import BenchmarkScenario

    with open(argv[1]) as fh:
        spec = json.load(fh)
    args = BenchmarkScenario.create(scenario=None, spec=spec)
    asyncio.run(benchmark_generative_text(args=args, progress=False, console=None))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
