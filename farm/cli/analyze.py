"""`farm analyze`: selection and report over recorded results; no engine runs.

Usable on its own (`python -m farm.cli.analyze --results FILE`) and as a subcommand of `farm`.
"""

from __future__ import annotations

import click

from farm.cli import options as opt


@click.command("analyze", cls=opt.OneLineErrors)
@click.option("--results", "results_path", required=True, type=opt.FILE, metavar="FILE",
              help="Results in the seed-results.json format (profiles{} and runs[]), or one a sweep wrote.")
@click.option("--config", "config", type=opt.FILE, default=None, metavar="FILE",
              help="Study YAML: primary profile, success-rate gate, baseline and the ordered `seed` steps "
                   "(default: configs/qwen3.5-35b-a3b-h200.yaml).")
@opt.pick_option
@click.option("--baseline", type=opt.NAME, default=None, metavar="TRIAL",
              help="Trial id, trial name or run id to compare against (default: the engine-default trial).")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option("--plots", "plots", type=opt.DIRECTORY, default=None, metavar="DIR", help="Also write PNG plots into DIR.")
@click.option("--out", "out", type=opt.DIRECTORY, default=None, metavar="DIR",
              help="Also write report.md, appendix.md (every trial's row and every run's figures) and plots/ into DIR.")
@opt.price_option
def analyze(results_path: str, config: str | None, pick: str | None, legacy_pick: str | None, baseline: str | None,
            fmt: str, plots: str | None, out: str | None = None, prices: tuple = ()) -> None:
    """Recommend a serve command from recorded benchmark results and report why."""
    # Imported when the command runs, so that `farm --help` and the other commands skip mlflow, ray, scipy.
    from pathlib import Path

    from farm.report import render, report_for, write_plots, write_report_files
    from farm.store.results_store import ResultsFileStore
    from farm.study.load import load_study

    # A UserError from here on is one line and exit 2 (the `farm` group, or OneLineErrors standalone).
    study = opt.with_prices(load_study(config), prices)
    results = ResultsFileStore(results_path).records(study=study)
    study = _recorded_accelerator(study, results)
    # Without --config, a sweep's own file knows its primary profile better than the default study.
    report = report_for(results, study, strategy=opt.picked(pick, legacy_pick), baseline=baseline, prefer_results_profile=config is None)
    output = render(report, fmt)
    written = write_plots(report, plots) if plots else []
    files = write_report_files(report, Path(out)) if out else []
    click.echo(output, nl=False)
    for path in written:
        click.echo(f"plot: {path}", err=True)
    if files:  # on stderr: stdout stays the report alone (--format json is parsed)
        click.echo(f"wrote {', '.join(sorted({f.relative_to(out).parts[0] for f in files}))} to {out}", err=True)


def _recorded_accelerator(study, results):
    """A study that says `accelerator_type: auto` read beside a results file: the GPU model its
    runs recorded (their provenance), where they recorded one; else it stays auto (nothing is
    predicted per a GPU model the runs do not name)."""
    from farm.analysis.accelerator import recorded_accelerator, resolved, says_auto

    if not says_auto(study):
        return study
    name = recorded_accelerator(r.provenance.gpu for r in results.records if r.provenance is not None)
    return resolved(study, name) if name else study


if __name__ == "__main__":
    analyze()
