"""A real sweep's makespan against its ideal, from what MLflow holds (the GPUs' own start and run
times, not a simulation: bench/makespan.py is the simulated one).

    python bench/makespan_measured.py SWEEP_ID --tracking-uri sqlite:///.../mlflow.db --gpus 8

Each trial holds its GPUs from its actor's start to its end, once per pass of `--repeats auto` or
halving rung (its result's held spans). A sweep resumed on a later machine is measured per sitting (split where no trial ran for
--gap seconds). Prints per sitting: trials, GPUs, makespan, ideal = max(longest trial, GPU-seconds /
GPUs), efficiency = ideal / makespan, and the share of GPU-seconds a trial held.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    from farm.analysis.makespan import Held, cluster_use, sittings
    from farm.errors import UserError
    from farm.run.preflight import stored_sweep_results

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_id")
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--gpus", type=int, required=True, help="GPUs the sweep's cluster had")
    parser.add_argument("--gap", type=float, default=60.0, help="idle seconds that end a sitting")
    args = parser.parse_args()
    if args.gpus <= 0:
        parser.error(f"--gpus: the cluster's GPUs, a positive number, not {args.gpus}")
    try:
        results = stored_sweep_results(args.tracking_uri, args.sweep_id)
    except UserError as exc:
        parser.error(exc.line())
    if not results:
        parser.error(f"no trial result of sweep {args.sweep_id} in {args.tracking_uri}")
    # Each time a trial held its GPUs (a later pass of --repeats auto is another engine, another span).
    spans = [(r, s) for r in results for s in r.held_spans()]
    held = [Held(s.started_at, s.finished_at, r.trial.gpus) for r, s in spans]
    timed = len({r.trial.id for r, _ in spans})
    print(f"sweep {args.sweep_id}: {len(results)} trial(s), {timed} with start and end times, {len(held)} span(s) "
          f"of GPU use, {args.gpus} GPUs")
    unrecorded = sum(1 for _, s in spans if not s.engine_start_recorded)
    if unrecorded:
        print(f"note: {unrecorded} later pass(es) stored before spans were recorded: their span is their runs' own "
              f"times, without the engine start before them")
    print(f"{'sitting':>7}  {'spans':>6}  {'makespan s':>10}  {'ideal s':>8}  {'efficiency':>10}  {'GPU busy':>8}")
    for n, part in enumerate(sittings(held, args.gap), 1):
        u = cluster_use(part, args.gpus)
        print(f"{n:>7}  {u.trials:>6}  {u.makespan_s:>10.0f}  {u.ideal_s:>8.0f}  {u.efficiency:>10.2f}  {u.busy:>8.0%}")
    print("ideal = max(longest trial, GPU-seconds held / GPUs); target (issue \"The farm's own cost\"): efficiency >= 0.9")


if __name__ == "__main__":
    main()
