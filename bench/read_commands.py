"""How quickly the read-only commands answer, beside the floor: importing MLflow's client.

`farm status`, `farm report` and `farm analyze` only read a store; each should answer in about
the time `import mlflow.tracking` takes plus the read itself (issue "The first hour of a new
user": within 2x the MLflow client's import time + 1-2 s). This writes a 4-trial smoke sweep to
a SQLite MLflow store in a temporary directory with farm's own writer (as the trial actors do),
exports its results file, then times each command in a fresh interpreter (the user's case: every
command is a new process) and lists the heavy packages it loaded. A benchmark, not a test:

    python bench/read_commands.py              # 3 runs each, this checkout
    python bench/read_commands.py --runs 5 --repo /tmp/farm-before   # another checkout's farm

Measured 2026-12-02 on the 2-core dev machine (load average ~3, shared), one run each, before
(f1cc211) -> after: `import mlflow.tracking` 2.2 s; farm status 4.3 -> 4.1 s (MLflow's SQLite
store, sqlalchemy, is most of the rest); farm report 7.1 -> 4.8 s (no scipy.stats with single
runs, no matplotlib without --out); farm analyze 2.1 -> 0.9 s. Modules loaded (independent of
load): report 2874 -> 2302, analyze 1014 -> 423, status 2215 (mlflow.tracking alone 1792, with
its SQLite store 2160).
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

HERE = Path(__file__).resolve().parents[1]
HEAVY = ("ray", "scipy.stats", "matplotlib", "guidellm", "torch", "transformers", "mlflow", "pandas", "rich")

# Runs a command as `farm` does, then says which heavy packages it had loaded (on stderr's last line).
WRAP = """
import atexit, sys
atexit.register(lambda: print("LOADED " + ",".join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr))
sys.argv = ["farm"] + {argv!r}
from farm.cli.main import main
main()
"""


def write_sweep(tmp: Path, repo: Path) -> tuple[str, str, Path]:
    """(tracking uri, sweep id, results file) of a finished 4-trial smoke sweep, in the checkout's own layout."""
    code = f"""
import sys
from pathlib import Path
sys.path.insert(0, {str(HERE / 'tests' / 'unit' / 'store')!r})
from farm.study.load import load_study
from farm.study.grid import expand
from farm.store import tracking
from farm.run.sweep_report import build
from test_what_mlflow_shows import _result
tmp = Path({str(tmp)!r})
study = load_study()
trials = expand(study, "smoke")
uri = f"sqlite:///{{tmp / 'mlflow.db'}}"
exp_id, sweep_id = tracking.start_sweep(uri, "bench-read", study, "smoke", trials, command="farm sweep", repeats=1)
for t in trials:
    res = _result(t)
    res.sweep_id = sweep_id
    tracking.log_trial(uri, exp_id, sweep_id, res, None)
report, why, files = build(study, "smoke", tracking.load_results(uri, sweep_id), sweep_id, tmp / "report")
tracking.finish_sweep(uri, sweep_id, "finished", files)
print(uri, sweep_id)
"""
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(repo)}, cwd=tmp,
                         capture_output=True, text=True, check=True)
    uri, sweep_id = out.stdout.split()[-2:]
    return uri, sweep_id, tmp / "report" / "results.json"


def timed(argv: list[str], repo: Path, cwd: Path, wrap: bool = True) -> tuple[float, str]:
    code = WRAP.format(heavy=HEAVY, argv=argv) if wrap else argv[0]
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(repo)}, cwd=cwd,
                       capture_output=True, text=True)
    took = time.perf_counter() - t0
    if p.returncode not in (0, 3):
        raise SystemExit(f"{argv}: exit {p.returncode}\n{p.stderr[-2000:]}")
    loaded = next((line[7:] for line in reversed(p.stderr.splitlines()) if line.startswith("LOADED ")), "")
    return took, loaded


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repo", type=Path, default=HERE, help="the checkout whose farm is timed (default: this one)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        uri, sweep_id, results = write_sweep(tmp, args.repo)
        cases = {
            "import mlflow.tracking (floor)": (["import mlflow.tracking"], False),
            "farm status": (["status", "--tracking-uri", uri], True),
            "farm report SWEEP_ID": (["report", sweep_id, "--tracking-uri", uri], True),
            "farm analyze --results": (["analyze", "--results", str(results)], True),
        }
        rows = []
        for name, (argv, wrap) in cases.items():
            seconds, loaded = [], ""
            for _ in range(args.runs):
                took, loaded = timed(argv, args.repo, tmp, wrap)
                seconds.append(took)
            rows.append((name, statistics.median(seconds), min(seconds), loaded))
    floor = rows[0][1]
    print(f"{'command':<32} {'median s':>9} {'min s':>7} {'x floor':>8}  heavy packages loaded")
    for name, med, low, loaded in rows:
        print(f"{name:<32} {med:>9.2f} {low:>7.2f} {med / floor:>8.2f}  {loaded or '-'}")
    print(f"target: each command within 2 x {floor:.2f} s (+1-2 s for the read); {os.cpu_count()} CPU(s), "
          f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
