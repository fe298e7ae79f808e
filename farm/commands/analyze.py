"""`farm analyze`: selection and report over recorded results; no engine runs.

Usable on its own (`python -m farm.commands.analyze --results FILE`) and as a subcommand of `farm`.
"""

from __future__ import annotations

import click

from farm.errors import UserError


def _fail(exc: UserError) -> None:
    # The same line and exit code as the `farm` group gives, so the command behaves alike standalone.
    click.echo(f"error: {exc.line()}", err=True)
    raise click.exceptions.Exit(exc.exit_code)


@click.command("analyze")
@click.option("--results", "results_path", required=True, metavar="FILE",
              help="Results in the seed-results.json format (profiles{} and runs[]), or one a sweep wrote.")
@click.option("--config", "config", default=None, metavar="FILE",
              help="Study YAML: primary profile, success-rate gate, baseline and the ordered `seed` steps "
                   "(default: configs/qwen3.5-35b-a3b-h200.yaml).")
@click.option("--strategy", type=click.Choice(["best", "stepwise"]), default="best", show_default=True,
              help="best: the global best of what was measured; stepwise: replay the seed's method along the ordered steps.")
@click.option("--baseline", default=None, metavar="TRIAL",
              help="Trial id, trial name or run id to compare against (default: the engine-default trial).")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option("--plots", "plots", default=None, metavar="DIR", help="Also write PNG plots into DIR.")
def analyze(results_path: str, config: str | None, strategy: str, baseline: str | None, fmt: str, plots: str | None) -> None:
    """Recommend a serve command from recorded benchmark results and report why."""
    from farm.records import load_results_file
    from farm.report import render, report_for, write_plots
    from farm.spec import load_study

    try:
        study = load_study(config)
        results = load_results_file(results_path)
        # Without --config, a sweep's own file knows its primary profile better than the default study.
        report = report_for(results, study, strategy=strategy, baseline=baseline, prefer_results_profile=config is None)
        output = render(report, fmt)
        written = write_plots(report, plots) if plots else []
    except UserError as exc:
        _fail(exc)
    click.echo(output, nl=False)
    for path in written:
        click.echo(f"plot: {path}", err=True)


if __name__ == "__main__":
    analyze()
