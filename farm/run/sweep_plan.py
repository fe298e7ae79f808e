"""`farm sweep` resolved once (issue 52 item 2): the command's options (`SweepOptions`) become one
typed `SweepPlan` (the study with its effective repeats, strategy, budget and start; the trials; the
store; where Ray is; the resume point), built here and handed to the run (`run_and_report`), so the
CLI parses, makes one call and prints. What each strategy takes (a budget, a start, its own
repeats) is asked of the search registry (farm/run/search.py), never of its name.

A dry run stops after the options are checked (farm/run/dry_run.py); a sweep against a Ray Jobs
address is submitted from here (farm/run/jobs.py); the rest is checked before anything starts
(farm/run/preflight.py), and a resume without --strategy continues as the sweep ran."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from farm.errors import UserError
from farm.inputs import env_ray_address, ray_address_source, tracking_source, usable_directory
from farm.run import search
from farm.study.spec import Study
from farm.study.trial import Trial

if TYPE_CHECKING:
    from farm.analysis.quality_runs import QualityJob


@dataclass(frozen=True)
class SweepOptions:
    """`farm sweep`'s options as given (farm/cli/main.py); `study` is the study file read, its
    prices set (`--price`)."""

    study: Study
    config: str | None
    grid: str
    dry_run: bool = False
    address: str | None = None
    tracking_uri: str | None = None
    experiment: str | None = None
    resume: str | None = None
    repeats: int | str | None = None
    run_budget: int | None = None
    strategy: str | None = None
    start: str | None = None
    budget: float | None = None
    baseline: str | None = None
    compile_cache: str | None = None
    accelerator: str | None = None
    workdir: str = "farm-runs"
    workdir_given: bool = False
    no_wait: bool = False
    only: tuple[str, ...] = ()
    controls: tuple[str, ...] = ()
    quiet: bool = False
    as_json: bool = False
    prices: tuple[tuple[str, float], ...] = ()
    wait_lease: float | None = None
    argv: str = "farm sweep"


@dataclass
class SweepPlan:
    """The sweep as it will run: the study with the options over its keys, the grid's trials (a
    local search's start among them), the store, where Ray is, the resume point, the part of the grid
    to run now (`only`), the trials the memory fit prunes, and the strategy (the study's). The driver
    takes it as it is (farm/run/driver.py `run_sweep(plan, events)`)."""

    study: Study
    grid: str
    trials: list[Trial]
    tracking_uri: str = ""
    experiment: str | None = None
    address: str | None = None
    resume: str | None = None
    repeats: int | str = 1
    workdir: Path = Path("farm-runs")
    command: str = "farm sweep"
    only: set[str] | None = None
    copies: tuple[str, ...] = ()  # trial ids run again first, as controls on this resume's machine (--control)
    pruned: dict[str, str] | None = None
    start: str | None = None  # the trial id a local search starts from
    wait_lease: float = 0.0
    mode: str = "normal"  # what the terminal shows: normal, quiet or json
    address_key: str = "--address"
    tracking_key: str = "--tracking-uri"
    renamed: dict[str, str] = field(default_factory=dict)
    quality_job: QualityJob | None = None  # the quality gate's task as the preflight read it, for the driver

    @property
    def strategy(self) -> str:
        return self.study.strategy

    @property
    def budget_gpu_hours(self) -> float | None:
        return self.study.budget_gpu_hours


def with_strategy(study: Study, strategy: str | None, budget: float | None, *, repeats, only, resume=None,
                  start=None) -> Study:
    """The study with the sweep's strategy, budget and start (options over the study's keys),
    checked against what the strategy takes (farm/run/search.py). A `--resume` may raise the budget
    alone: whether that sweep is a halving or a local one is read from its run."""
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


def check_options_apply(study: Study, *, address, repeats, run_budget, no_wait, quiet=False, as_json=False) -> None:
    """An option that would change nothing in this sweep is a mistake, not a no-op."""
    from farm.run.jobs import is_jobs_address

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


def resolve(o: SweepOptions) -> SweepPlan:
    """The plan before anything outside is asked: the options checked and applied to the study, the
    grid expanded, a local search's start read into a trial of it, the trials to run now."""
    from farm.study.grid import expand, select_trials

    study = o.study
    if o.accelerator is not None:  # this sweep's GPU model, over the study's and every engine's
        from farm.analysis.accelerator import with_accelerator

        study = with_accelerator(study, o.accelerator)
    # RAY_ADDRESS stands for --address when none is given, as in Ray's own commands; a refusal
    # about the address names which of the two set it.
    address_key = ray_address_source(o.address)
    address = o.address or env_ray_address()
    check_options_apply(study, address=address, repeats=o.repeats, run_budget=o.run_budget, no_wait=o.no_wait,
                        quiet=o.quiet, as_json=o.as_json)
    # The effective repeats and budget travel with the study (its MLflow snapshot, the report's alpha).
    study = study.model_copy(update={k: v for k, v in (("repeats", o.repeats), ("max_runs", o.run_budget))
                                     if v is not None})
    study = with_strategy(study, o.strategy, o.budget, repeats=o.repeats, only=o.only, resume=o.resume, start=o.start)
    if o.compile_cache is not None:
        # a directory as the user wrote it, relative to where they are
        shared = o.compile_cache if o.compile_cache == "ray" else str(Path(o.compile_cache).expanduser().resolve())
        study = study.model_copy(update={"compile_cache": shared})
    if address is None:  # a local sweep's engines and guidellm write there: usable before anything starts
        usable_directory(o.workdir, key="--workdir")
    trials = expand(study, o.grid)
    start_id = None
    kind = search.kind_of(study.strategy)  # what the options mean to it
    if kind.starts_from and study.start:
        from farm.analysis.start_command import start_of

        trials, start_id = start_of(study, o.grid, trials, study.start, key="--from" if o.start else "start")
    selected = select_trials(trials, o.only, key="--trial") if o.only else None
    copies = _controls(o, trials, kind)
    if o.baseline is not None:
        if kind.starts_from:
            raise UserError(f"a {kind.title or kind.name}'s baseline is its start (--from)", key="--baseline")
        select_trials(trials, [o.baseline], key="--baseline")  # a trial of this grid, or one line and exit 2
        study = study.model_copy(update={"baseline": o.baseline})
    return SweepPlan(study=study, grid=o.grid, trials=trials, tracking_uri=o.tracking_uri or "",
                     experiment=o.experiment, address=address, resume=o.resume, repeats=o.repeats or study.repeats,
                     workdir=Path(o.workdir), command=o.argv, only=selected, copies=copies, start=start_id,
                     wait_lease=o.wait_lease or 0, mode="json" if o.as_json else "quiet" if o.quiet else "normal",
                     address_key=address_key)


def _controls(o: SweepOptions, trials: list[Trial], kind) -> tuple[str, ...]:
    """`--control`: the trials to copy, in the grid's order; one line and exit 2 where it cannot apply."""
    if not o.controls:
        return ()
    if not o.resume:
        raise UserError("only with --resume: it runs again a trial the sweep has measured, as a control on the "
                        "machine the resume runs on", key="--control")
    if kind.name != "grid":
        raise UserError(f"only for a grid sweep; a {kind.title or kind.name} runs its own controls where it resumes",
                        key="--control")
    from farm.study.grid import select_trials

    wanted = select_trials(trials, o.controls, key="--control")
    return tuple(t.id for t in trials if t.id in wanted)


def _check_here(o: SweepOptions, plan: SweepPlan) -> None:
    """The options that only a sweep run from this machine takes."""
    from farm.run.jobs import is_jobs_address

    jobs = is_jobs_address(plan.address)
    if o.compile_cache is not None and jobs:
        raise UserError("is where this machine's trials share caches; with --address http://... the sweep runs as a "
                        "Ray job: set the study's `compile_cache:` instead", key="--compile-cache")
    if o.baseline is not None and jobs:
        raise UserError("shapes the report this machine writes; with --address http://... the sweep runs as a Ray "
                        "job: set the study's `baseline:` instead, or use `farm report SWEEP_ID --baseline TRIAL`",
                        key="--baseline")
    if o.wait_lease is not None and (not o.resume or jobs):
        raise UserError("only with --resume, run from this machine: a new sweep has no other driver to wait for, "
                        "and a Ray job's driver refuses at once", key="--wait-lease")
    if o.controls and jobs:
        raise UserError("runs part of a sweep from this machine; it does not combine with --address http://...",
                        key="--control")
    if o.only and (jobs or o.repeats == "auto"):
        raise UserError("--trial runs part of a sweep from this machine; it does not combine with "
                        "--address http://... or --repeats auto", key="--trial")


def _checked(o: SweepOptions, plan: SweepPlan) -> SweepPlan:
    """The plan once the outside world is checked (datasets, the store, the Ray address, the sweep
    to resume), and a resume without --strategy continues as the sweep ran (a halving sweep as one,
    a local search from where it started)."""
    from farm.run.preflight import check_sweep  # mlflow: not for --dry-run
    from farm.store.tracking import default_tracking_uri
    from farm.study.grid import expand

    # a refusal names where the store came from (the option, MLFLOW_TRACKING_URI, the default)
    plan.tracking_key = tracking_source(plan.tracking_uri or None)
    plan.tracking_uri = plan.tracking_uri or default_tracking_uri()

    def check() -> None:
        checks = check_sweep(plan.study, plan.trials, grid=plan.grid, address=plan.address,
                             tracking_uri=plan.tracking_uri, resume=plan.resume, tracking_key=plan.tracking_key,
                             address_key=plan.address_key, experiment=plan.experiment)
        plan.quality_job = checks.quality  # read once: the driver answers with it
        point = checks.point
        if point is not None and point.renamed:  # a sweep stored with ids of the older form keeps them
            plan.trials = point.rename(plan.trials)
            plan.renamed = dict(point.renamed)

    check()
    if plan.renamed:
        plan.only = {plan.renamed.get(i, i) for i in plan.only} if plan.only is not None else None
        plan.copies = tuple(plan.renamed.get(i, i) for i in plan.copies)
        plan.pruned = {plan.renamed.get(i, i): why for i, why in plan.pruned.items()} if plan.pruned else plan.pruned
    if not (o.resume and o.strategy is None and plan.study.strategy == "grid"):
        return plan
    from farm.run.memory import unfit_trials
    from farm.store.searches import stored_strategy

    stored = stored_strategy(plan.tracking_uri, o.resume)  # a halving sweep resumes as one
    if stored is None and o.budget is not None:
        raise UserError(f"only with --strategy halving; sweep {o.resume} is a grid sweep, which runs every trial "
                        f"whatever the budget", key="--budget")
    if stored is None:
        return plan
    if plan.copies:  # a search or halving sweep resumed without --strategy: it runs its own controls
        raise UserError(f"only for a grid sweep; sweep {o.resume} is a {stored[0]} sweep, which runs its own controls "
                        f"where it resumes", key="--control")
    budget = o.budget if o.budget is not None else stored[1]
    if search.kind_of(stored[0]).starts_from:  # a search resumes from where it started
        from farm.analysis.start_command import start_of
        from farm.store.mlflow_store import MlflowStore

        kept = MlflowStore(plan.tracking_uri).study(o.resume)
        plan.study = with_strategy(plan.study, stored[0], budget, repeats=o.repeats, only=o.only,
                                   start=kept.start if kept else None, resume=o.resume)
        plan.trials, plan.start = start_of(plan.study, plan.grid, expand(plan.study, plan.grid),
                                           plan.study.start or "", key="start")
        plan.renamed = {}
        check()
    else:
        plan.study = with_strategy(plan.study, stored[0], budget, repeats=o.repeats, only=o.only)
        plan.pruned = unfit_trials(plan.study, plan.trials)
    return plan


def run_command(o: SweepOptions) -> int | None:
    """`farm sweep`: the dry run, a Ray job submitted (its exit code), or the sweep run here and reported."""
    plan = resolve(o)
    if o.dry_run:
        from farm.run.dry_run import dry_run

        dry_run(plan.study, plan.grid, plan.trials, selected=plan.only, mode=plan.mode, resume=o.resume,
                tracking_uri=o.tracking_uri, start=plan.start, copies=plan.copies)
        return None
    if search.kind_of(plan.strategy).prunes_unfit:  # with accelerator_type auto: again once the cluster names its GPUs
        from farm.run.memory import unfit_trials

        plan.pruned = unfit_trials(plan.study, plan.trials)
    from farm.run.jobs import check_tracking_for_cluster, enable_client_token, is_client_address, is_jobs_address

    _check_here(o, plan)
    if is_jobs_address(plan.address):
        # The Ray Jobs API: the sweep runs on the head as a Ray job; this side submits and follows it.
        from farm.run.jobs import submit_from_cli

        return submit_from_cli(o.config, plan.address, grid=o.grid, tracking_uri=o.tracking_uri,
                               experiment=o.experiment, resume=o.resume, repeats=o.repeats, run_budget=o.run_budget,
                               workdir=o.workdir if o.workdir_given else None, wait=not o.no_wait,
                               strategy=o.strategy, budget=o.budget, accelerator=o.accelerator, prices=o.prices,
                               key=plan.address_key)
    if plan.address:
        enable_client_token(plan.address_key)  # an explicit address: Ray sends the cluster's token only in token mode
    if is_client_address(plan.address):
        # Ray Client: the actors run on the cluster's nodes, so they log to a server all of them
        # reach, and a relative --workdir is a path on each node (under the job's working directory).
        plan.tracking_uri = check_tracking_for_cluster(o.tracking_uri) or ""
    else:
        plan.workdir = plan.workdir.resolve()
    from farm.run import terminal
    from farm.run.sweep_view import run_and_report

    terminal.set_mode(plan.mode)
    run_and_report(_checked(o, plan))
    return None
