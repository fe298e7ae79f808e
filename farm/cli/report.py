"""`farm report SWEEP_ID...`: a sweep's report (or several sweeps' together), rebuilt from what MLflow stored."""

from __future__ import annotations

from pathlib import Path

import click

from farm.cli import options as opt
from farm.errors import SLONotMet, UserError
from farm.inputs import tracking_source


@click.command("report")
@click.argument("sweep_ids", metavar="SWEEP_ID", nargs=-1, required=True, type=opt.SWEEP_ID)
@click.option("--tracking-uri", type=opt.TRACKING_URI, default=None, help="MLflow tracking URI; default: sqlite:///mlflow.db here.")
@opt.pick_option
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option("--out", "out", type=opt.DIRECTORY, default=None, metavar="DIR",
              help="Also write report.md, appendix.md (every trial's row and every run's figures), results.json, "
                   "recommendation.txt and plots/ into DIR.")
@click.option("--baseline", type=opt.NAME, default=None, metavar="TRIAL",
              help="Trial id or name to compare against (default: the sweep's study's baseline, else the engine-default trial).")
@opt.price_option
def report(sweep_ids: tuple[str, ...], tracking_uri: str | None, pick: str | None, legacy_pick: str | None, fmt: str,
           out: str | None, baseline: str | None, prices: tuple = ()) -> None:
    """Selection and report of a stored sweep; no engine runs.

    Several sweeps of one study (one grid per engine, say) are reported as one: the first one's
    study and grid lead, and its engine comparison sets every engine's trials side by side.
    """
    # Imported when the command runs, so that `farm --help` and the other commands skip mlflow, ray, scipy.
    from farm.analysis.merge import merge_results
    from farm.analysis.records import records_from_trials
    from farm.report import render
    from farm.run.preflight import check_store_to_read
    from farm.run.stored_search import read_search
    from farm.run.sweep_report import build_from_records, local_baseline
    from farm.store.mlflow_store import MlflowStore
    from farm.store.tracking import default_tracking_uri

    uri = tracking_uri or default_tracking_uri()
    source = tracking_source(tracking_uri)  # errors name where the URI came from
    check_store_to_read(uri, key=source)
    store = MlflowStore(uri, key=source)
    if len(set(sweep_ids)) != len(sweep_ids):
        raise UserError("a sweep is named twice", key="SWEEP_ID")
    parts, infos, searches, study = [], [], [], None
    for sweep_id in sweep_ids:
        info = store.sweep(sweep_id)
        if info is None:
            raise UserError(f"no sweep with id '{sweep_id}' in {uri}", key="SWEEP_ID")
        stored = store.study(sweep_id)
        if stored is None:
            raise UserError(f"no study stored with the sweep (sweep/study.yaml in {uri})", key=f"sweep {sweep_id}")
        results = store.results(sweep_id)
        # A halving sweep's records are read with its rungs' profiles, as its own report read them.
        search = read_search(uri, sweep_id, stored, info.grid, store.planned_trials(sweep_id), results,
                             named=len(sweep_ids) > 1)
        # The first sweep's study judges them all; an engine it does not know is judged by the
        # spec of the sweep that ran it (its required flags tell its default trial), and so are
        # the profiles a later halving sweep's rungs ran.
        rungs = {} if search.halving is None else search.study.profiles
        study = search.study if study is None else study.model_copy(
            update={"engines": {**stored.engines, **study.engines}, "profiles": {**rungs, **study.profiles}})
        infos.append(info)
        searches.append(search)
        parts.append(records_from_trials(results, search.study, grid=info.grid, sweep_id=sweep_id))
    records = merge_results(parts)
    study = opt.with_prices(study, prices)

    def sections(rep) -> None:  # each sweep's Halving and Memory fit sections, in the order named
        rep.halving = [s.halving for s in searches if s.halving is not None]
        rep.local_search = [s.local_search for s in searches if s.local_search is not None]
        rep.memory_fit = [s.memory_fit for s in searches if s.memory_fit is not None]

    # Files (and matplotlib's import) only where --out asks for them.
    rep, why, files = build_from_records(study, infos[0].grid, records, Path(out) if out else None, strategy=opt.picked(pick, legacy_pick),
                                         extra=sections, baseline=baseline or local_baseline(study, infos[0].grid))
    if rep is None and len(searches) == 1 and searches[0].local_search is not None:
        # A local search still under way, or one that ended without measuring its start (it could not
        # start and the study asked for no repair): nothing to select on its profiles, but its path
        # (what each step raced and measured, the repairs it made, why it stopped) is the report.
        _search_in_progress(searches[0].local_search, sweep_ids[0], fmt)
        if searches[0].local_search.plan.done:
            raise click.exceptions.Exit(1)  # ended with no answer: farm sweep's exit code for no recommendation
        return
    if rep is None:  # no trial meeting a capacity SLO has its own exit code (farm sweep's)
        raise (SLONotMet if getattr(why, "exit_code", 1) == SLONotMet.exit_code else UserError)(
            why or "no report", key=f"sweep {' '.join(sweep_ids)}")
    click.echo(render(rep, fmt), nl=False)
    if files:  # on stderr: stdout stays the report alone (--format json is parsed)
        click.echo(f"wrote {', '.join(sorted({f.relative_to(out).parts[0] for f in files}))} to {out}", err=True)


def _search_in_progress(note, sweep_id: str, fmt: str) -> None:
    import json

    from farm.report.search import local_search_lines

    lines = [line.replace("SWEEP_ID", sweep_id) for line in local_search_lines(note)]
    if fmt == "json":
        click.echo(json.dumps({"sweep_id": sweep_id, "done": note.plan.done, "recommended": None,
                               "local_search": [{**note.plan.model_dump(mode="json"), "labels": note.labels,
                                                 "lines": lines}]}, indent=1))
    elif fmt == "markdown":
        state = "ended without an answer" if note.plan.done else "in progress"
        click.echo(f"# Sweep {sweep_id}: local search {state}\n\n" + "\n".join(f"    {line}" for line in lines))
    else:
        click.echo("\n".join(lines))
