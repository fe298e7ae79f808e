"""What farm itself costs a trial: time its GPUs are held while nothing is measured.

Runs the smoke study (`configs/smoke.yaml`: 4 mock-engine trials x 2 profiles, real Ray, real
guidellm, real MLflow in SQLite) through the real `farm sweep` command, once for each number of
trials in flight, and reads every trial's record back from MLflow. Per run and per trial:

- client overhead (per run) = the run's wall time in the actor (cache reset, the guidellm client
  process from spawn to its report, the engine's counters) - guidellm's own benchmark duration;
- farm overhead (per trial) = the actor's wall time for the trial - (engine start to ready +
  warm-ups + the runs' wall times): stopping the engine, writing the record, logging it;
- slot idle (per trial) = (the sweep's wall time x trials in flight - the trials' wall times) /
  trials: a slot (a GPU on a cluster) waiting for Ray to start an actor, for the driver, or at the
  sweep's tail when fewer trials are left than slots.

Targets (issue "The farm's own cost"): client overhead <= 1 s a run, farm overhead <= 2 s a trial.
A benchmark, not a test:

    python bench/overhead.py                 # 1 and 2 trials in flight
    python bench/overhead.py --in-flight 1 2 4
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from farm.store.tracking import load_results  # noqa: E402

SMOKE = REPO / "configs" / "smoke.yaml"


def study_with(in_flight: int, folder: Path) -> Path:
    smoke = yaml.safe_load(SMOKE.read_text())  # an include: the default study's smoke part
    smoke["grids"]["smoke"]["max_concurrent_trials"] = in_flight
    (folder / f"smoke-{in_flight}.yaml").write_text(yaml.safe_dump(smoke, sort_keys=False))
    path = folder / f"overhead-{in_flight}.yaml"
    path.write_text(yaml.safe_dump({"name": f"overhead-{in_flight}", "include": [f"smoke-{in_flight}.yaml"],
                                    "primary_profile": "smoke_chat"}))
    return path


def sweep(in_flight: int, folder: Path) -> tuple[str, float, str]:
    config = study_with(in_flight, folder)
    uri = f"sqlite:///{folder}/mlflow-{in_flight}.db"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "farm.cli", "sweep", "--config", str(config), "--grid", "smoke",
                           "--tracking-uri", uri, "--workdir", str(folder / f"runs-{in_flight}")],
                          cwd=folder, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - started
    found = re.search(r"^sweep ([0-9a-f]{32})", done.stdout, re.M)
    if done.returncode != 0 or not found:
        raise SystemExit(f"farm sweep failed ({done.returncode}): {(done.stderr or done.stdout).strip()[-800:]}")
    return found.group(1), wall, uri


def measure(in_flight: int, folder: Path) -> dict:
    sweep_id, wall, uri = sweep(in_flight, folder)
    results = load_results(uri, sweep_id)
    client, farm, trial_walls, starts, bench = [], [], [], [], []
    for result in results:
        runs = [r for r in result.runs if r.started_at and r.finished_at and r.metrics]
        run_walls = [r.finished_at - r.started_at for r in runs]
        client += [w - r.metrics.duration_s for w, r in zip(run_walls, runs)]
        bench += [r.metrics.duration_s for r in runs]
        trial_wall = result.finished_at - result.started_at
        start = float(result.engine_reported.get("ready_s", 0.0))
        warm = sum(w.seconds for w in result.warmup_runs)
        farm.append(trial_wall - start - warm - sum(run_walls))
        trial_walls.append(trial_wall)
        starts.append(start)
    # the sweep's own wall time: from the command's start, Ray and MLflow start-up included
    idle = (wall * in_flight - sum(trial_walls)) / len(results)
    return {"in_flight": in_flight, "trials": len(results), "runs": len(client), "wall": wall,
            "client_med": statistics.median(client), "client_max": max(client),
            "farm_med": statistics.median(farm), "farm_max": max(farm),
            "trial_med": statistics.median(trial_walls), "start_med": statistics.median(starts),
            "bench_share": sum(bench) / sum(trial_walls), "idle": idle}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in-flight", type=int, nargs="+", default=[1, 2], help="trials in flight, one sweep each")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(n, Path(tmp)) for n in args.in_flight]
    print(f"farm's own cost on the smoke study (mock engine; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at the end)")
    print(f"{'in flight':>9}  {'trials':>6}  {'runs':>4}  {'sweep s':>7}  {'trial s':>7}  {'start s':>7}  "
          f"{'client/run s (med, max)':>23}  {'farm/trial s (med, max)':>23}  {'slot idle/trial s':>17}  bench share")
    for r in rows:
        print(f"{r['in_flight']:>9}  {r['trials']:>6}  {r['runs']:>4}  {r['wall']:>7.1f}  {r['trial_med']:>7.1f}  "
              f"{r['start_med']:>7.1f}  {r['client_med']:>11.2f}, {r['client_max']:>9.2f}  "
              f"{r['farm_med']:>11.2f}, {r['farm_max']:>9.2f}  {r['idle']:>17.1f}  {r['bench_share']:>10.0%}")
    print("targets: client overhead <= 1 s a run, farm overhead <= 2 s a trial")


if __name__ == "__main__":
    main()
