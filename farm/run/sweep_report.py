"""The end of a sweep, and `farm report SWEEP_ID`: selection and report over the stored results.

Both read the trial results back from MLflow (never from best-so-far state in the driver), so a
resumed or re-analysed sweep reports exactly what a fresh one would.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from rich.console import Console

from farm.store import schema, tracking
from farm.errors import UserError
from farm.analysis.records import Results, records_from_trials, write_results_file
from farm.report import Report, render, report_for, verdict_line, write_plots
from farm.analysis.results import TrialResult
from farm.study.spec import Study

console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def build(study: Study, grid: str | None, results: list[TrialResult], sweep_id: str, outdir: Path,
          strategy: str = "best") -> tuple[Report | None, str | None, list[Path]]:
    """Report, or why there is none, and the files written (report.md, results.json, plots)."""
    records = records_from_trials(results, study, grid=grid, sweep_id=sweep_id)
    return build_from_records(study, grid, records, outdir, strategy)


def build_from_records(study: Study, grid: str | None, records: Results, outdir: Path,
                       strategy: str = "best") -> tuple[Report | None, str | None, list[Path]]:
    """`build` over records already read from a store (`farm.store.base.SweepStore.records`)."""
    outdir.mkdir(parents=True, exist_ok=True)
    files = [write_results_file(records, outdir / schema.REPORT_RESULTS)]
    try:
        report = report_for(records, study, strategy=strategy, grid=grid)
    except UserError as exc:  # e.g. no eligible trial: the sweep still has its results
        return None, exc.reason, files
    (outdir / schema.REPORT_MARKDOWN).write_text(render(report, "markdown"))
    files.append(outdir / schema.REPORT_MARKDOWN)
    (outdir / schema.REPORT_RECOMMENDATION).write_text(report.selection.recommended.command + "\n")
    files.append(outdir / schema.REPORT_RECOMMENDATION)
    files += [Path(p) for p in write_plots(report, outdir / schema.REPORT_PLOTS)]
    return report, None, files


def finish(study: Study, grid: str, outcome, uri: str, pending: list | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        report, why, files = build(study, grid, outcome.results, outcome.sweep_id, Path(tmp))
        # A sweep run in pieces (`--trial`) is not finished while trials of its grid are pending.
        tracking.finish_sweep(uri, outcome.sweep_id, "partial" if pending else "finished", files)
    if report is None:
        console.print(f"no recommendation: {why}")
    else:
        rec = report.selection.recommended
        console.print(f"\nrecommended: trial {rec.name or rec.trial}, {rec.total_tps:,.1f} total tok/s on "
                      f"{report.selection.primary_profile}")
        print(f"  {rec.command}")
        evidence = verdict_line(report)
        if evidence:
            console.print(f"evidence: {evidence}")
        for w in report.warnings[:8]:
            console.print(f"  warning {w.code}: {w.message}")
        if len(report.warnings) > 8:
            console.print(f"  ... {len(report.warnings) - 8} more warning(s) in the report")
    console.print(f"\nsweep id: {outcome.sweep_id}  (report: farm report {outcome.sweep_id} --tracking-uri {uri})")
    # A tracking server has its own UI; a local store needs `mlflow ui` started over it.
    console.print(f"results:  {uri}" if uri.startswith(("http://", "https://")) else
                  f"results:  mlflow ui --backend-store-uri {uri}")
    if report is None:
        raise SystemExit(1)
