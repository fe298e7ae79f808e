"""What `farm sweep` shows: the dry-run listing, live progress, the summary and the recommendation."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import sys

from rich.console import Console
from rich.table import Table

from farm.engines import get_engine
from farm.results import Status, TrialResult
from farm.spec import Study
from farm.trial import Trial

console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def _flags_text(trial: Trial) -> str:
    return " ".join(f"{k}={v}" for k, v in trial.flags.items()) or "(engine defaults)"


def print_dry_run(study: Study, grid: str, trials: list[Trial]) -> None:
    """Every trial with its exact command line, one line each, ready to paste; nothing starts."""
    from farm.grid import grid_costs

    print(f"study {study.name} ({study.source}), grid {grid}: {len(trials)} trial(s), "
          f"profiles {', '.join(study.grid_profiles(grid))}, primary {study.grid_primary_profile(grid)}")
    print("cost of each grid at the seed's measured durations:")
    for cost in grid_costs(study).values():
        print(f"  {cost.line()}")
    for t in trials:
        engine = get_engine(t.engine)
        spec = study.engines[t.engine]
        argv = engine.command(spec, t, port=8000)
        print()
        print(f"{t.id}  {t.name or ''}".rstrip())
        print(f"  engine={t.engine} model={t.model} gpus={t.gpus} flags: {_flags_text(t)}")
        print(f"  {shlex.join(argv)}")


def _primary_tps(result: TrialResult, profile: str) -> float | None:
    values = [r.metrics.total_tps for r in result.runs_of(profile) if r.metrics is not None]
    return sum(values) / len(values) if values else None


def print_summary(study: Study, grid: str, results: list[TrialResult]) -> None:
    for profile in study.grid_profiles(grid):
        table = Table(title=f"profile {profile}", title_justify="left")
        for col in ("trial", "status", "total tok/s", "output tok/s", "TTFT mean ms", "TPOT mean ms", "success"):
            table.add_column(col, justify="left" if col in ("trial", "status") else "right")
        for res in results:
            runs = [r for r in res.runs_of(profile) if r.metrics is not None]
            status = next((r.status.value for r in res.runs_of(profile) if r.status != Status.ok), None) \
                or (res.status.value if not res.runs_of(profile) else "ok")

            def avg(attr: str) -> str:
                vals = [getattr(r.metrics, attr) for r in runs if getattr(r.metrics, attr) is not None]
                return f"{sum(vals) / len(vals):,.1f}" if vals else "-"
            success = f"{sum(r.metrics.success_rate for r in runs) / len(runs):.1%}" if runs else "-"
            table.add_row(f"{res.trial.label} {_flags_text(res.trial)}", status, avg("total_tps"),
                          avg("output_tps"), avg("ttft_mean_ms"), avg("tpot_mean_ms"), success)
        console.print(table)


def run_and_report(study: Study, grid: str, trials: list[Trial], *, address, tracking_uri, experiment, resume,
                   repeats: int, workdir: Path, command: str) -> None:
    from farm import driver, tracking

    uri = tracking_uri or tracking.default_tracking_uri()
    total = len(trials)
    state = {"done": 0, "t0": time.monotonic()}

    def on_sweep(sweep_id: str) -> None:
        console.print(f"sweep [bold]{sweep_id}[/] - {total} trial(s) of grid {grid}, {repeats} repeat(s); "
                      f"tracking {uri}")

    def on_event(kind: str, job, result) -> None:
        elapsed = time.monotonic() - state["t0"]
        if kind == "started":
            console.print(f"[{elapsed:6.0f}s] start   {job.trial.label} ({_flags_text(job.trial)}) attempt {job.attempt}")
        elif kind == "retry":
            console.print(f"[{elapsed:6.0f}s] retry   {job.trial.label}: {result.status.value} ({result.reason})")
        else:
            state["done"] += 1
            tps = _primary_tps(result, study.grid_primary_profile(grid))
            extra = f"{tps:,.0f} tok/s on {study.grid_primary_profile(grid)}" if tps else (result.reason or "")
            console.print(f"[{elapsed:6.0f}s] [{state['done']}/{total}] {result.status.value:<22} "
                          f"{job.trial.label}: {extra}")

    outcome = driver.run_sweep(study, grid, trials, tracking_uri=uri, experiment=experiment or study.experiment_name,
                               address=address, resume=resume, repeats=repeats, workdir=workdir, command=command,
                               on_event=on_event, on_sweep=on_sweep)
    if outcome.skipped:
        console.print(f"resumed: {len(outcome.skipped)} trial(s) already finished were not run again")
    print_summary(study, grid, outcome.results)
    if outcome.interrupted:
        console.print(f"interrupted: engines stopped, sweep marked killed. Resume with:\n  {command} --resume {outcome.sweep_id}")
        raise SystemExit(130)
    from farm.sweep_report import finish

    finish(study, grid, outcome, uri)
