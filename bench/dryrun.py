"""How long `farm sweep --dry-run` takes on a large study: the grid a user checks before a sweep
must print at once, not after a coffee.

The study is the default H200 study (`configs/qwen3.5-35b-a3b-h200.yaml`: its models, profiles
and engines) with one extra grid, `wide`, whose vLLM block crosses knob axes to the wanted size
(10,000 trials by default: 10 batch limits x 10 batch budgets x 10 memory fractions x 10 CUDA-graph
sizes). Each size is timed twice:

- `command`: the whole `farm sweep --config STUDY --grid wide --dry-run` as a user runs it, in a
  fresh interpreter (imports included), its output to a file;
- `in-process`: load the study and expand the grid (`farm.study.load.load_study`, `expand`),
  what `--dry-run` does after its imports.

Target: the command takes under 2 s for 10,000 trials. A benchmark, not a test:

    python bench/dryrun.py                   # 262 (the full grid), 1,000 and 10,000 trials
    python bench/dryrun.py --sizes 10000 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from farm.study.grid import expand  # noqa: E402
from farm.study.load import load_study  # noqa: E402

STUDY = REPO / "configs" / "qwen3.5-35b-a3b-h200.yaml"


def axes_for(size: int) -> dict[str, list]:
    """Four knob axes whose product is `size` (a power of ten up to 10^4, or any size as 1 axis)."""
    side = round(size ** 0.25)
    if side ** 4 == size:
        return {
            "max_running_requests": [64 * (i + 1) for i in range(side)],
            "max_batched_tokens": [2048 * (i + 1) for i in range(side)],
            "gpu_memory_fraction": [round(0.80 + 0.01 * i, 2) for i in range(side)],
            "cuda_graph": [32 * (i + 1) for i in range(side)],
        }
    return {"max_running_requests": [8 * (i + 1) for i in range(size)]}


def write_study(size: int, folder: Path) -> Path:
    study = yaml.safe_load(STUDY.read_text())
    # its includes are relative to the study's own folder
    study["include"] = [str(STUDY.parent / name) for name in study.get("include", [])]
    study["grids"]["wide"] = {
        "description": f"{size} trials for the dry-run benchmark",
        "profiles": ["sharegpt"],
        "blocks": [{"engine": "vllm", "models": ["fp8"], "knob_axes": axes_for(size)}],
    }
    path = folder / f"wide-{size}.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def time_command(config: Path, grid: str, out: Path) -> float:
    started = time.perf_counter()
    with out.open("w") as sink:
        done = subprocess.run([sys.executable, "-m", "farm.cli", "sweep", "--config", str(config), "--grid", grid,
                               "--dry-run"], cwd=REPO, stdout=sink, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"farm sweep --dry-run failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return elapsed


def time_in_process(config: Path, grid: str) -> tuple[float, int]:
    started = time.perf_counter()
    study = load_study(config)
    trials = expand(study, grid)
    return time.perf_counter() - started, len(trials)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[262, 1000, 10000],
                        help="trials per study; 262 is the default study's own `full` grid")
    parser.add_argument("--repeats", type=int, default=3, help="timings per size (the median is shown)")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for size in args.sizes:
            config, grid = (STUDY, "full") if size == 262 else (write_study(size, folder), "wide")
            command = [time_command(config, grid, folder / "out.txt") for _ in range(args.repeats)]
            lines = sum(1 for _ in (folder / "out.txt").open())
            inproc = [time_in_process(config, grid) for _ in range(args.repeats)]
            trials = inproc[0][1]
            rows.append((trials, grid, statistics.median(command), statistics.median(t for t, _ in inproc), lines))

    print(f"farm sweep --dry-run, median of {args.repeats} (python {sys.version.split()[0]}, {os.cpu_count()} cores)")
    print(f"{'trials':>7}  {'grid':<5}  {'command s':>9}  {'in-process s':>12}  {'trials/s':>9}  {'lines out':>9}  target")
    for trials, grid, command, inproc, lines in rows:
        target = ("met" if command < 2.0 else "missed") if trials >= 10000 else ""
        print(f"{trials:>7}  {grid:<5}  {command:>9.2f}  {inproc:>12.3f}  {trials / inproc:>9.0f}  {lines:>9}  {target}")


if __name__ == "__main__":
    main()
