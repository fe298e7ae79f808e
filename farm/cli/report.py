"""`farm report SWEEP_ID`: the sweep's report, rebuilt from what MLflow stored."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from farm.cli import options as opt
from farm.errors import SLONotMet, UserError


@click.command("report")
@click.argument("sweep_id", type=opt.SWEEP_ID)
@click.option("--tracking-uri", type=opt.TRACKING_URI, default=None, help="MLflow tracking URI; default: sqlite:///mlflow.db here.")
@click.option("--strategy", type=click.Choice(["best", "stepwise"]), default="best", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option("--out", "out", type=opt.DIRECTORY, default=None, metavar="DIR", help="Also write report.md, results.json and plots into DIR.")
def report(sweep_id: str, tracking_uri: str | None, strategy: str, fmt: str, out: str | None) -> None:
    """Selection and report of a stored sweep; no engine runs."""
    # Imported when the command runs, so that `farm --help` and the other commands skip mlflow, ray, scipy.
    from farm.report import render
    from farm.run.preflight import check_store_to_read
    from farm.run.sweep_report import build_from_records
    from farm.store.mlflow_store import MlflowStore
    from farm.store.tracking import default_tracking_uri

    uri = tracking_uri or default_tracking_uri()
    check_store_to_read(uri)
    store = MlflowStore(uri)
    info = store.sweep(sweep_id)
    if info is None:
        raise UserError(f"no sweep with id '{sweep_id}' in {uri}", key="SWEEP_ID")
    study = store.study(sweep_id)
    if study is None:
        raise UserError(f"no study stored with the sweep (sweep/study.yaml in {uri})", key=f"sweep {sweep_id}")
    records = store.records(sweep_id, study)
    with tempfile.TemporaryDirectory() as tmp:
        rep, why, _ = build_from_records(study, info.grid, records, Path(out) if out else Path(tmp), strategy=strategy)
    if rep is None:  # no trial meeting a capacity SLO has its own exit code (farm sweep's)
        raise (SLONotMet if getattr(why, "exit_code", 1) == SLONotMet.exit_code else UserError)(
            why or "no report", key=f"sweep {sweep_id}")
    click.echo(render(rep, fmt), nl=False)
