"""Whether logging keeps up with a sweep's finished trials: trials logged per second to MLflow.

Each finished trial is one child run written by `farm.store.tracking.log_trial` (params, tags,
metrics in one `log_batch`, result.json, the engine log and the four profiles' reports as
artifacts, then the status tag): by its actor, so several at once on a cluster, or by the
driver for a trial whose actor was lost. At the sweep's end the driver reads every result back
(`load_results`). Measured on MLflow's local default, a SQLite file, with trials of the default
study's `full` grid and a real guidellm report (tests/fixtures) for each of the four profiles:

- 1 writer: the trials logged one after another (the driver's path for lost trials);
- N writers: N processes logging at once (actors finishing together), all into one SQLite file;
- reading back: `load_results` of every trial logged.

    python bench/driver_rate.py                  # 200 trials, 1 and 4 writers
    python bench/driver_rate.py --trials 1000 --writers 1 4 8
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

REPORT = REPO / "tests" / "fixtures" / "guidellm-0.8.1-mock-report.json"
ENGINE_LOG = REPO / "tests" / "fixtures" / "engine-logs" / "vllm-2025-11-gpu-kv-cache-reported.log"


def _results(sweep_id: str, n: int, offset: int, folder: Path):
    from farm.analysis.results import ProfileRun, Status, TrialResult, parse_report, slim_report
    from farm.study.grid import expand
    from farm.study.load import load_study

    study = load_study()
    trials = expand(study, "full")
    raw = json.loads(REPORT.read_text())
    metrics, _ = parse_report(raw, 48)
    files = folder / "files"
    files.mkdir(exist_ok=True)
    (files / "engine.log").write_text(ENGINE_LOG.read_text())
    for p in study.grid_profiles("full"):
        (files / f"{p}-r0.json").write_text(json.dumps(slim_report(raw)))
    out = []
    for i in range(offset, offset + n):
        t = trials[i % len(trials)].model_copy(update={"id": f"{trials[i % len(trials)].id}-{i}"})
        now = time.time()
        runs = [ProfileRun(profile=p, repeat=0, status=Status.ok, metrics=metrics, started_at=now, finished_at=now + 1,
                           report_file=f"{p}-r0.json") for p in t.profiles]
        out.append(TrialResult(sweep_id=sweep_id, trial=t, status=Status.ok, runs=runs, serve_command="serve",
                               started_at=now, finished_at=now + 5, node="n", node_id="a" * 32))
    return out, files


def _log(uri: str, exp_id: str, sweep_id: str, n: int, offset: int, folder: str) -> float:
    from farm.store import tracking

    results, files = _results(sweep_id, n, offset, Path(folder))
    started = time.perf_counter()
    for r in results:
        tracking.log_trial(uri, exp_id, sweep_id, r, files)
    return time.perf_counter() - started


def measure(trials: int, writers: int, folder: Path) -> dict:
    from farm.store import tracking
    from farm.study.grid import expand
    from farm.study.load import load_study

    uri = f"sqlite:///{folder}/mlflow-{writers}.db"
    study = load_study()
    exp_id, sweep_id = tracking.start_sweep(uri, "driver-rate", study, "full", expand(study, "full"),
                                            command="bench", repeats=1)
    each = trials // writers
    started = time.perf_counter()
    with ProcessPoolExecutor(writers) as pool:
        futures = [pool.submit(_log, uri, exp_id, sweep_id, each, w * each, str(folder / f"w{writers}-{w}"))
                   for w in range(writers)]
        busy = [f.result() for f in futures]
    wall = time.perf_counter() - started
    t0 = time.perf_counter()
    loaded = tracking.load_results(uri, sweep_id)
    read = time.perf_counter() - t0
    return {"writers": writers, "trials": each * writers, "rate": each * writers / max(busy),
            "per_trial": sum(busy) / (each * writers), "wall": wall, "loaded": len(loaded), "read": read}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="farm-driver-rate-") as tmp:
        for w in args.writers:
            for n in range(w):
                (Path(tmp) / f"w{w}-{n}").mkdir()
        rows = [measure(args.trials, w, Path(tmp)) for w in args.writers]
    print(f"trials logged to MLflow (SQLite, local artifacts), {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at the end")
    print(f"{'writers':>7}  {'trials':>6}  {'trials/s':>8}  {'s per trial (one writer)':>24}  "
          f"{'load_results s':>14}  {'trials/s read':>13}")
    for r in rows:
        print(f"{r['writers']:>7}  {r['trials']:>6}  {r['rate']:>8.1f}  {r['per_trial']:>24.3f}  {r['read']:>14.1f}  "
              f"{r['loaded'] / r['read']:>13.1f}")


if __name__ == "__main__":
    main()
