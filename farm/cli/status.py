"""`farm status [SWEEP_ID]`: trials done, failed, running and pending, from MLflow and Ray."""

from __future__ import annotations

import json

import click

from farm.cli import options as opt


@click.command("status")
@click.argument("sweep_id", type=opt.SWEEP_ID, required=False)
@click.option("--tracking-uri", type=opt.TRACKING_URI, default=None, help="MLflow tracking URI; default: sqlite:///mlflow.db here.")
@click.option("--address", type=opt.RAY_ADDRESS, default=None,
              help="Ray dashboard (http://HEAD:8265) or 'auto', to see which trials run now; default: $RAY_ADDRESS.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def status(sweep_id: str | None, tracking_uri: str | None, address: str | None, fmt: str) -> None:
    """Where a sweep stands (default: the latest sweep in the tracking store)."""
    # Imported when the command runs, so that `farm --help` and the other commands skip mlflow, ray, scipy.
    from farm import inputs
    from farm.store import tracking
    from farm.run.preflight import check_store_to_read
    from farm.run.sweep_status import render, sweep_status

    address = address or inputs.env_ray_address()  # a malformed RAY_ADDRESS is named before any store is opened
    uri = tracking_uri or tracking.default_tracking_uri()
    source = inputs.tracking_source(tracking_uri)  # errors name where the URI came from
    check_store_to_read(uri, key=source)
    if address:
        from farm.run.jobs import enable_client_token  # ray: only with an address

        enable_client_token()
    st = sweep_status(uri, sweep_id, address=address, tracking_key=source)
    click.echo(json.dumps(st.as_dict(), indent=1) if fmt == "json" else render(st))
