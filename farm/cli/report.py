"""`farm report SWEEP_ID`: the sweep's report, rebuilt from what MLflow stored."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from farm.cli import options as opt
from farm.errors import UserError


@click.command("report")
@click.argument("sweep_id", type=opt.SWEEP_ID)
@click.option("--tracking-uri", type=opt.TRACKING_URI, default=None, help="MLflow tracking URI; default: sqlite:///mlflow.db here.")
@click.option("--strategy", type=click.Choice(["best", "stepwise"]), default="best", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option("--out", "out", type=opt.DIRECTORY, default=None, metavar="DIR", help="Also write report.md, results.json and plots into DIR.")
def report(sweep_id: str, tracking_uri: str | None, strategy: str, fmt: str, out: str | None) -> None:
    """Selection and report of a stored sweep; no engine runs."""
    from farm.store import tracking
    from farm.run.preflight import check_store_to_read
    from farm.report import render
    from farm.run.sweep_report import build

    uri = tracking_uri or tracking.default_tracking_uri()
    check_store_to_read(uri)
    run = tracking.get_sweep(uri, sweep_id)
    if run is None:
        raise UserError(f"no sweep with id '{sweep_id}' in {uri}", key="SWEEP_ID")
    study = tracking.load_study_snapshot(uri, sweep_id)
    grid = run.data.tags.get("farm.grid")
    results = tracking.load_results(uri, sweep_id)
    with tempfile.TemporaryDirectory() as tmp:
        rep, why, _ = build(study, grid, results, sweep_id, Path(out) if out else Path(tmp), strategy=strategy)
    if rep is None:
        raise UserError(why or "no report", key=f"sweep {sweep_id}")
    click.echo(render(rep, fmt), nl=False)
