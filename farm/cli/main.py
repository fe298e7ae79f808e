"""`farm`: the command line. It builds a spec, calls an entry point, and prints what came back.

Every user mistake is a `UserError`: one line on stderr naming file, key and reason, exit 2.
"""

from __future__ import annotations

import shlex
import sys

import click

from farm.cli import options as opt
from farm.errors import UserError


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
@click.option("--control", "controls", multiple=True, type=opt.NAME, metavar="NAME|ID",
              help="With --resume: run a copy of this measured trial first (repeatable), as a control on the machine "
                   "this resume runs on; the trials the resume runs are compared with it within that machine (a "
                   "sweep in pieces over lent machines). The copy is never ranked.")
@click.option("--quiet", is_flag=True, help="Print only the recommended command and the sweep id (errors on stderr); "
              "with --dry-run, only the command lines.")
@click.option("--json", "as_json", is_flag=True, help="Print only a JSON summary on stdout (sweep id, status, the "
              "recommended trial and command, numbers per profile, failures, counts); progress goes to stderr. "
              "With --dry-run, the trials as JSON.")
@opt.price_option
def sweep(config, prices=(), **options) -> None:
    """Expand a grid into trials and benchmark each on its own engine server.

    \b
    Exit codes: 0 a recommendation; 1 no recommendation (every trial failed or none is
    eligible); 2 a mistake in the study or an option (nothing started); 3 no trial meets a
    capacity profile's SLO even at its lowest load (the sweep ran; one line names the closest
    trial and how far it misses each limit).
    """
    # Imported when the command runs, so that `farm --help` and the other commands skip mlflow, ray, scipy.
    from farm.study.load import load_study
    from farm.run.sweep_plan import SweepOptions, run_command

    ctx = click.get_current_context()
    study = opt.with_prices(load_study(config), prices)  # stored with the sweep: its report prices at them
    code = run_command(SweepOptions(
        study=study, config=config, prices=tuple(prices), argv="farm " + shlex.join(sys.argv[1:]),
        workdir_given=ctx.get_parameter_source("workdir") != click.core.ParameterSource.DEFAULT, **options))
    if code is not None:  # a Ray job's exit code (--address http://...)
        ctx.exit(code)


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
