"""`farm`: the command line. It builds a spec, calls an entry point, and prints what came back.

Every user mistake is a `UserError`: one line on stderr naming file, key and reason, exit 2.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from farm.cli import options as opt
from farm.errors import UserError
from farm.inputs import env_ray_address, ray_address_source, tracking_source, usable_directory


class FarmGroup(click.Group):
    """Turns `UserError` into one line and exit code 2, wherever it is raised."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except UserError as exc:
            click.echo(f"error: {exc.line()}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=FarmGroup)
@click.version_option(package_name="farm")
def cli() -> None:
    """farm: sweep LLM serving configurations over a Ray cluster and recommend one serve command."""


@cli.command()
@click.option("--config", "config", type=opt.FILE, default=None,
              help="Study YAML (default: configs/qwen3.5-35b-a3b-h200.yaml).")
@click.option("--grid", required=True, type=opt.NAME, help="Name of a grid in the study (smoke, seed, full, ...).")
@click.option("--dry-run", is_flag=True, help="Print every trial and its exact command line; start nothing. With "
              "--tracking-uri: estimate GPU-hours at the durations the study's latest sweep there measured.")
@click.option("--address", type=opt.RAY_ADDRESS, default=None,
              help="http://HEAD:8265: submit the sweep as a Ray job (Jobs API); auto, HOST:PORT or ray://HOST:10001: "
                   "run the driver here against that cluster; default: $RAY_ADDRESS, else a local Ray started for "
                   "the sweep.")
@click.option("--tracking-uri", type=opt.TRACKING_URI, default=None, help="MLflow tracking URI; default: sqlite:///mlflow.db here.")
@click.option("--experiment", type=opt.SAFE_NAME, default=None, help="MLflow experiment; default: the grid's, else the study's.")
@click.option("--resume", "resume", type=opt.SWEEP_ID, default=None, metavar="SWEEP_ID", help="Continue this sweep: run only its unfinished trials.")
@click.option("--wait-lease", "wait_lease", type=opt.LEASE_WAIT_S, default=None, metavar="SECONDS",
              help="With --resume: if another driver runs the sweep, wait up to SECONDS for it to end, then "
                   "resume (default: refuse at once; one driver a sweep).")
@click.option("--repeats", type=opt.REPEATS, default=None, metavar="N|auto",
              help="Runs per trial and profile, or 'auto': 3, then more only for the trials still overlapping "
                   "the leader (default: the study's).")
@click.option("--run-budget", type=opt.RUNS, default=None, metavar="RUNS",
              help="With --repeats auto: benchmark runs the sweep may make in all (default: the study's max_runs, "
                   "else 3 x the first pass).")
@click.option("--strategy", type=opt.STRATEGY, default=None,
              help="grid: every trial (default: the study's strategy, else grid); halving: short runs first, then "
                   "only the trials not significantly worse than the leader go on, rung by rung; local: a guarded "
                   "local search from --from, moving only to a significantly better neighbour.")
@click.option("--from", "start", type=opt.COMMAND, default=None, metavar="COMMAND|TRIAL",
              help="With --strategy local: where the search starts, the serve command you run today "
                   "(\"vllm serve MODEL --flag ...\") or a trial of the grid (name or id).")
@click.option("--budget", "budget", type=opt.GPU_HOURS, default=None, metavar="GPU_HOURS",
              help="With --strategy halving or local: GPU-hours the sweep may spend (engine starts and runs), checked "
                   "before each rung or step (default: the study's budget_gpu_hours, else no limit).")
@click.option("--baseline", type=opt.NAME, default=None, metavar="TRIAL",
              help="The trial (name or id) the recommendation is compared with (default: the study's baseline, else "
                   "the engine-default trial; a local search's: its start).")
@click.option("--compile-cache", "compile_cache", type=opt.NAME, default=None, metavar="DIR|ray",
              help="Where trials share engine compile caches: a directory every node sees (kept across sweeps and "
                   "machines), or ray (Ray's object store, this sweep); default: the study's compile_cache, else "
                   "Ray's object store on a cluster of several nodes.")
@click.option("--accelerator", type=opt.ACCELERATOR, default=None, metavar="NAME|auto",
              help="GPU model the sweep's GPU trials run on, as Ray names it (H200, H100, ...), or auto: the one "
                   "model the cluster has, read when the sweep starts; overrides the study's accelerator_type (and "
                   "every engine's). With --dry-run, NAME predicts memory for that GPU.")
@click.option("--workdir", type=opt.NODE_DIRECTORY, default="farm-runs", show_default=True,
              help="Where engine logs and guidellm reports are written on each node.")
@click.option("--no-wait", is_flag=True, help="With --address http://HEAD:8265: submit the job and return.")
@click.option("--trial", "only", multiple=True, type=opt.NAME, metavar="NAME|ID",
              help="Run only this trial of the grid now (repeatable); the sweep keeps the grid's other trials "
                   "pending, for a later `--resume` (a sweep in pieces, e.g. one per GPU lease).")
@click.option("--quiet", is_flag=True, help="Print only the recommended command and the sweep id (errors on stderr); "
              "with --dry-run, only the command lines.")
@click.option("--json", "as_json", is_flag=True, help="Print only a JSON summary on stdout (sweep id, status, the "
              "recommended trial and command, numbers per profile, failures, counts); progress goes to stderr. "
              "With --dry-run, the trials as JSON.")
@opt.price_option
def sweep(config, grid, dry_run, address, tracking_uri, experiment, resume, repeats, run_budget, strategy, start,
          budget, baseline, compile_cache, accelerator, workdir, no_wait, only, quiet, as_json, prices=(),
          wait_lease=None) -> None:
    """Expand a grid into trials and benchmark each on its own engine server.

    \b
    Exit codes: 0 a recommendation; 1 no recommendation (every trial failed or none is
    eligible); 2 a mistake in the study or an option (nothing started); 3 no trial meets a
    capacity profile's SLO even at its lowest load (the sweep ran; one line names the closest
    trial and how far it misses each limit).
    """
    # Imported when the command runs, so that `farm --help` and the other commands skip mlflow, ray, scipy.
    from farm.study.grid import expand, select_trials
    from farm.study.load import load_study
    from farm.run import search

    study = opt.with_prices(load_study(config), prices)  # stored with the sweep: its report prices at them
    if accelerator is not None:  # this sweep's GPU model, over the study's and every engine's
        from farm.analysis.accelerator import with_accelerator

        study = with_accelerator(study, accelerator)
    # RAY_ADDRESS stands for --address when none is given, as in Ray's own commands; a refusal
    # about the address names which of the two set it.
    address_key = ray_address_source(address)
    address = address or env_ray_address()
    _check_options_apply(study, address=address, repeats=repeats, run_budget=run_budget, no_wait=no_wait,
                         quiet=quiet, as_json=as_json)
    mode = "json" if as_json else "quiet" if quiet else "normal"
    # The effective repeats and budget travel with the study (its MLflow snapshot, the report's alpha).
    study = study.model_copy(update={k: v for k, v in (("repeats", repeats), ("max_runs", run_budget)) if v is not None})
    study = _with_strategy(study, strategy, budget, repeats=repeats, only=only, resume=resume, start=start)
    if compile_cache is not None:
        # a directory as the user wrote it, relative to where they are
        shared = compile_cache if compile_cache == "ray" else str(Path(compile_cache).expanduser().resolve())
        study = study.model_copy(update={"compile_cache": shared})
    if address is None:  # a local sweep's engines and guidellm write there: usable before anything starts
        usable_directory(workdir, key="--workdir")
    trials = expand(study, grid)
    start_id = None
    kind = search.kind_of(study.strategy)  # what the options mean to it (farm/run/search.py)
    if kind.starts_from and study.start:
        from farm.analysis.start_command import start_of

        trials, start_id = start_of(study, grid, trials, study.start, key="--from" if start else "start")
    selected = select_trials(trials, only, key="--trial") if only else None
    if baseline is not None:
        if kind.starts_from:
            raise UserError(f"a {kind.title or kind.name}'s baseline is its start (--from)", key="--baseline")
        select_trials(trials, [baseline], key="--baseline")  # a trial of this grid, or one line and exit 2
        study = study.model_copy(update={"baseline": baseline})
    if dry_run:
        from farm.run.dry_run import dry_run as print_dry_run

        print_dry_run(study, grid, trials, selected=selected, mode=mode, resume=resume, tracking_uri=tracking_uri,
                      start=start_id)
        return
    pruned = None
    if kind.prunes_unfit:  # with accelerator_type auto: again once the cluster names its GPUs (driver)
        from farm.run.memory import unfit_trials

        pruned = unfit_trials(study, trials)
    from farm.run.jobs import (check_tracking_for_cluster, enable_client_token, is_client_address, is_jobs_address,
                               submit_from_cli)

    if compile_cache is not None and is_jobs_address(address):
        raise UserError("is where this machine's trials share caches; with --address http://... the sweep runs as a "
                        "Ray job: set the study's `compile_cache:` instead", key="--compile-cache")
    if baseline is not None and is_jobs_address(address):
        raise UserError("shapes the report this machine writes; with --address http://... the sweep runs as a Ray "
                        "job: set the study's `baseline:` instead, or use `farm report SWEEP_ID --baseline TRIAL`",
                        key="--baseline")
    if wait_lease is not None and (not resume or is_jobs_address(address)):
        raise UserError("only with --resume, run from this machine: a new sweep has no other driver to wait for, "
                        "and a Ray job's driver refuses at once", key="--wait-lease")
    if only and (is_jobs_address(address) or repeats == "auto"):
        raise UserError("--trial runs part of a sweep from this machine; it does not combine with "
                        "--address http://... or --repeats auto", key="--trial")

    if is_jobs_address(address):
        # The Ray Jobs API: the sweep runs on the head as a Ray job; this side submits and follows it.
        ctx = click.get_current_context()
        given_workdir = ctx.get_parameter_source("workdir") != click.core.ParameterSource.DEFAULT
        ctx.exit(submit_from_cli(config, address, grid=grid, tracking_uri=tracking_uri, experiment=experiment,
                                 resume=resume, repeats=repeats, run_budget=run_budget,
                                 workdir=workdir if given_workdir else None,
                                 wait=not no_wait, strategy=strategy, budget=budget, accelerator=accelerator,
                                 prices=prices, key=address_key))
    if address:
        enable_client_token(address_key)  # an explicit address: Ray sends the cluster's token only in token mode
    if is_client_address(address):
        # Ray Client: the actors run on the cluster's nodes, so they log to a server all of them
        # reach, and a relative --workdir is a path on each node (under the job's working directory).
        tracking_uri = check_tracking_for_cluster(tracking_uri)
        node_workdir = Path(workdir)
    else:
        node_workdir = Path(workdir).resolve()
    from farm.run.preflight import check_sweep  # mlflow: not for --dry-run
    from farm.run import terminal
    from farm.run.sweep_view import run_and_report
    from farm.store.tracking import default_tracking_uri

    terminal.set_mode(mode)

    # Datasets, tracking store, Ray address, the sweep to resume: checked before anything starts;
    # a refusal names where the store came from (the option, MLFLOW_TRACKING_URI, the default).
    tracking_key = tracking_source(tracking_uri)
    tracking_uri = tracking_uri or default_tracking_uri()
    point = check_sweep(study, trials, grid=grid, address=address, tracking_uri=tracking_uri, resume=resume,
                        tracking_key=tracking_key, address_key=address_key, experiment=experiment)
    if point is not None and point.renamed:  # a sweep stored with ids of the older form keeps them
        trials = point.rename(trials)
        selected = {point.renamed.get(i, i) for i in selected} if selected is not None else None
        pruned = {point.renamed.get(i, i): why for i, why in pruned.items()} if pruned else pruned
    if resume and strategy is None and study.strategy == "grid":
        from farm.run.memory import unfit_trials
        from farm.store.searches import stored_strategy

        stored = stored_strategy(tracking_uri, resume)  # a halving sweep resumes as one
        if stored is None and budget is not None:
            raise UserError(f"only with --strategy halving; sweep {resume} is a grid sweep, which runs every trial "
                            f"whatever the budget", key="--budget")
        if stored is not None and search.kind_of(stored[0]).starts_from:  # a search resumes from where it started
            from farm.analysis.start_command import start_of
            from farm.store.mlflow_store import MlflowStore

            kept = MlflowStore(tracking_uri).study(resume)
            study = _with_strategy(study, stored[0], budget if budget is not None else stored[1], repeats=repeats,
                                   only=only, start=kept.start if kept else None, resume=resume)
            trials, start_id = start_of(study, grid, expand(study, grid), study.start or "", key="start")
            point = check_sweep(study, trials, grid=grid, address=address, tracking_uri=tracking_uri, resume=resume,
                                tracking_key=tracking_key, address_key=address_key, experiment=experiment)
            if point is not None and point.renamed:
                trials = point.rename(trials)
        elif stored is not None:
            study = _with_strategy(study, stored[0], budget if budget is not None else stored[1], repeats=repeats,
                                   only=only)
            pruned = unfit_trials(study, trials)
    argv = "farm " + shlex.join(sys.argv[1:])
    run_and_report(study, grid, trials, address=address, tracking_uri=tracking_uri, experiment=experiment,
                   resume=resume, repeats=repeats or study.repeats, workdir=node_workdir, command=argv,
                   only=selected, strategy=study.strategy, budget_gpu_hours=study.budget_gpu_hours, pruned=pruned,
                   start=start_id, wait_lease=wait_lease or 0)


def _with_strategy(study, strategy, budget, *, repeats, only, resume=None, start=None):
    """The study with the sweep's strategy, budget and start (options over the study's keys),
    checked against what the strategy takes (farm/run/search.py). A `--resume` may raise the budget
    alone: whether that sweep is a halving or a local one is read from its run."""
    from farm.run import search

    strategy = strategy or study.strategy
    kind = search.kind_of(strategy)
    others = [search.kind_of(n) for n in search.choices()]
    if budget is not None and not kind.takes_budget and not resume:
        raise UserError(f"only with --strategy {' or '.join(k.name for k in others if k.takes_budget)} (a grid sweep "
                        "runs every trial, whatever the budget)", key="--budget")
    if start is not None and not kind.starts_from:
        starts = [k for k in others if k.starts_from]
        raise UserError(f"only with --strategy {' or '.join(k.name for k in starts)} (where the "
                        f"{' or '.join(k.title or k.name for k in starts)} starts)", key="--from")
    if kind.starts_from and not (start or study.start) and not resume:
        raise UserError(f"--strategy {strategy} starts from the serve command you run today or a trial of the grid: "
                        "give it with --from", key="--strategy")
    if kind.plans_repeats:
        for flag, clash in (("--repeats auto", repeats == "auto" or study.repeats == "auto"), ("--trial", bool(only))):
            if clash:
                raise UserError(f"--strategy {strategy} plans its own rungs and repeats; it does not combine with {flag}",
                                key="--strategy")
    return study.model_copy(update={"strategy": strategy, "start": start or study.start,
                                    "budget_gpu_hours": budget if budget is not None else study.budget_gpu_hours})


def _check_options_apply(study, *, address, repeats, run_budget, no_wait, quiet=False, as_json=False) -> None:
    """An option that would change nothing in this sweep is a mistake, not a no-op."""
    from farm.run.jobs import is_jobs_address  # as in `sweep`

    if quiet and as_json:
        raise UserError("does not combine with --quiet (--json prints only the JSON summary already)", key="--json")
    for flag, given in (("--json", as_json), ("--quiet", quiet)):
        if given and is_jobs_address(address):
            raise UserError("shapes what this machine prints at the end of a sweep; with --address http://... the "
                            "sweep's output is the Ray job's log: read the result with `farm report SWEEP_ID "
                            "--format json` (or `farm status`) once the job ends", key=flag)

    if no_wait and not is_jobs_address(address):
        raise UserError("only with --address http://HEAD:8265 (a sweep run from here always waits for its end)",
                        key="--no-wait")
    if run_budget is not None and (repeats or study.repeats) != "auto":
        raise UserError(f"only with --repeats auto (or a study with repeats: auto); this sweep runs each profile "
                        f"{repeats or study.repeats} time(s), whatever the budget", key="--run-budget")


from farm.cli.analyze import analyze  # noqa: E402  (commands register after the group exists)
from farm.cli.report import report  # noqa: E402
from farm.cli.server import server  # noqa: E402
from farm.cli.status import status  # noqa: E402

cli.add_command(analyze)
cli.add_command(report)
cli.add_command(status)
cli.add_command(server)


def main() -> None:
    cli(prog_name="farm")


if __name__ == "__main__":
    main()
