"""What `farm sweep` shows: live progress, the summary and the recommendation (the dry run: farm/run/dry_run.py)."""

from __future__ import annotations

import shlex
import time
from contextlib import nullcontext

from rich.live import Live
from rich.table import Table
from rich.text import Text

from farm.engines import get_engine
from farm.engines.base import render_flags
from farm.analysis import capacity
from farm.analysis.halving import RUNG_MARK
from farm.analysis.outcome import LOG_EXPLAINS, NOT_MEASURED, success_floor
from farm.run import terminal
from farm.run.events import SweepEvents
from farm.run.links import mlflow_run_link, mlflow_trials_link
from farm.run.terminal import console
from farm.analysis.results import Status, TrialResult
from farm.secrets import redact_flags
from farm.study.grid import grid_cost
from farm.study.names import readable_ids
from farm.study.spec import Study
from farm.study.trial import Trial

def flags_text(trial: Trial) -> str:
    # As the engine is given them (its own rendering: a switch is `--flag`, JSON stays JSON, an
    # unset flag is absent), secret values masked wherever a trial is shown.
    flags = redact_flags(trial.flags, get_engine(trial.engine).secret_flag_names)
    return " ".join(render_flags(flags)) or "(engine defaults)"


def _primary_tps(result: TrialResult, profile: str) -> tuple[float, str] | None:
    """The mean throughput of the trial's runs of `profile`, else of its shortened rung (a halving
    rung, a local-search step: `<profile>.rung<N>`), with the profile name it was measured on."""
    names = [profile] + sorted({r.profile for r in result.runs if r.profile.startswith(profile + RUNG_MARK)})
    for name in names:
        values = [r.metrics.total_tps for r in result.runs_of(name) if r.metrics is not None and r.metrics.total_tps]
        if values:
            return sum(values) / len(values), name
    return None


def _capacity(study: Study, profile: str, result: TrialResult):
    """A capacity profile's verdict on one trial's search runs (farm/analysis/capacity.py)."""
    spec = study.profiles[profile]
    floor = success_floor(spec, study.min_success_rate)
    points = [capacity.point(r.load, r.metrics.model_dump(exclude_none=True) if r.metrics else None,
                             r.status == Status.ok, spec.slo, floor) for r in result.runs_of(profile) if r.load]
    return capacity.verdict(spec.capacity, points)


def _print_capacity(study: Study, profile: str, results: list[TrialResult]) -> None:
    table = Table(title=f"profile {profile} (capacity under its SLO, {study.profiles[profile].capacity.over})",
                  title_justify="left")
    for col in ("trial", "status", "capacity", "interval", "total tok/s there", "P95 TTFT ms there", "runs"):
        table.add_column(col, justify="left" if col in ("trial", "status", "interval") else "right")
    for res in results:
        v = _capacity(study, profile, res)
        table.add_row(f"{res.trial.label} {flags_text(res.trial)}", res.status.value,
                      f"{v.capacity:g}" if v.capacity is not None else "none", v.interval_text,
                      f"{v.at.total_tps:,.1f}" if v.at and v.at.total_tps else "-",
                      f"{v.at.ttft_p95_ms:,.1f}" if v.at and v.at.ttft_p95_ms else "-", str(len(v.curve)))
    console.print(table)


def print_summary(study: Study, grid: str, results: list[TrialResult]) -> None:
    for profile in study.grid_profiles(grid):
        if study.profiles[profile].capacity is not None:
            _print_capacity(study, profile, results)
            continue
        table = Table(title=f"profile {profile}", title_justify="left")
        for col in ("trial", "status", "total tok/s", "output tok/s", "TTFT mean ms", "TPOT mean ms", "success"):
            table.add_column(col, justify="left" if col in ("trial", "status") else "right")
        for res in results:
            runs = [r for r in res.runs_of(profile) if r.metrics is not None]
            status = next((r.status.value for r in res.runs_of(profile) if r.status != Status.ok), None) \
                or (res.status.value if not res.runs_of(profile) else "ok")

            def avg(attr: str) -> str:
                vals = [getattr(r.metrics, attr) for r in runs if getattr(r.metrics, attr) is not None]
                return f"{sum(vals) / len(vals):,.1f}" if vals else "-"
            success = f"{sum(r.metrics.success_rate for r in runs) / len(runs):.1%}" if runs else "-"
            table.add_row(f"{res.trial.label} {flags_text(res.trial)}", status, avg("total_tps"),
                          avg("output_tps"), avg("ttft_mean_ms"), avg("tpot_mean_ms"), success)
        console.print(table)
    print_failures(results)


FAILURE_TAIL_LINES = 4


def print_failures(results: list[TrialResult]) -> None:
    """Why each failed trial failed, with the last lines of its engine log (all of it is in MLflow)."""
    unmeasured = [r for r in results if r.status in NOT_MEASURED]
    if unmeasured:
        console.print(f"\n{len(unmeasured)} trial(s) not measured:")
        for res in unmeasured:
            console.print(f"  {res.status.value:<22} {res.trial.label}: {res.reason or ''}", markup=False)
    failed = [r for r in results if r.status != Status.ok and r.status not in NOT_MEASURED]
    if not failed:
        return
    console.print(f"\n{len(failed)} trial(s) failed:")
    for res in failed:
        where = f" on {res.node}" if res.node else ""
        console.print(f"  {res.status.value:<22} {res.trial.label} ({flags_text(res.trial)}), attempt {res.attempt}{where}: "
                      f"{res.reason or ''}", markup=False)
        for line in res.previous_attempts:
            console.print(f"      earlier {line}", markup=False)
        if res.status not in LOG_EXPLAINS:
            continue  # the engine was fine: its last lines are farm stopping it
        tail = [line for line in res.log_tail.splitlines() if line.strip()][-FAILURE_TAIL_LINES:]
        for line in tail:
            console.print(f"      | {line[:300]}", markup=False)


def _without_trial_options(command: str) -> str:
    """`command` without its `--trial` options: the resume of a sweep run in pieces runs the rest."""
    words, out, skip = shlex.split(command), [], False
    for word in words:
        if skip:
            skip = False
        elif word == "--trial":
            skip = True
        elif not word.startswith("--trial="):
            out.append(word)
    return shlex.join(out)


def resume_command(command: str, sweep_id: str) -> str:
    """`command` with `--resume SWEEP_ID` (replacing a --resume it already had)."""
    words = shlex.split(command)
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
            continue
        if word == "--resume":
            skip = True
            continue
        if word.startswith("--resume="):
            continue
        out.append(word)
    return shlex.join(out + ["--resume", sweep_id])


class Progress:
    """Live counts of a running sweep: trials done, failed, running, pending, the GPU-hours spent
    and an ETA. The ETA starts from the grid's GPU-hour estimate (farm/study/grid.py: seconds per
    trial at the seed's durations) and is rescaled by how long finished trials really took."""

    def __init__(self, study: Study, grid: str, trials: list[Trial], total: int, clock=time.monotonic):
        cost = grid_cost(study, grid, trials=trials) if trials else None
        self.estimate_s = cost.trial_hours * 3600 / max(cost.trials, 1) if cost else 0.0
        self.estimate_gpu_hours = cost.gpu_hours if cost else 0.0
        self.total, self.clock = total, clock
        self.done = self.failed = 0
        self.running: dict[str, tuple[float, int]] = {}  # trial id -> (started, GPUs)
        self.gpu_s = 0.0
        self.took: list[float] = []

    def started(self, trial: Trial) -> None:
        self.running[trial.id] = (self.clock(), trial.gpus)

    def finished(self, trial: Trial, ok: bool) -> None:
        start, gpus = self.running.pop(trial.id, (self.clock(), trial.gpus))
        took = self.clock() - start
        self.took.append(took)
        self.gpu_s += took * gpus
        self.done += ok
        self.failed += not ok

    def retried(self, trial: Trial) -> None:
        start, gpus = self.running.pop(trial.id, (self.clock(), trial.gpus))
        self.gpu_s += (self.clock() - start) * gpus

    def gpu_hours(self) -> float:
        now = self.clock()
        return (self.gpu_s + sum((now - t0) * g for t0, g in self.running.values())) / 3600

    def eta_s(self) -> float | None:
        pending = max(self.total - self.done - self.failed - len(self.running), 0)
        if not self.estimate_s or not (pending or self.running):
            return None
        per_trial = self.estimate_s
        if self.took:  # what this cluster really takes, against what the estimate assumed
            per_trial = sum(self.took) / len(self.took)
        now = self.clock()
        left_running = sum(max(per_trial - (now - t0), 0.0) for t0, _ in self.running.values())
        slots = max(len(self.running), 1)
        return (left_running + pending * per_trial) / slots

    def line(self) -> str:
        pending = max(self.total - self.done - self.failed - len(self.running), 0)
        eta = self.eta_s()
        eta_text = f"ETA ~{_duration(eta)}" if eta is not None else "ETA n/a"
        return (f"trials: {self.done} done, {self.failed} failed, {len(self.running)} running, {pending} pending | "
                f"GPU-hours {self.gpu_hours():.2f} of ~{self.estimate_gpu_hours:.2f} estimated | {eta_text}")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


class _Shown(SweepEvents):
    """The sweep's events as the terminal shows them (farm/run/events.py). `state` is what
    `run_and_report` reads back: the sweep's id, the trials done and counted, whether the
    dashboard closes with the sweep, the last halving rung or local search step."""

    def __init__(self, plan, uri: str, state: dict, progress: Progress, names: dict[str, str]):
        self.study, self.grid, self.repeats, self.strategy = plan.study, plan.grid, plan.repeats, plan.strategy
        self.uri, self.state, self.progress, self.names = uri, state, progress, names

    def on_sweep(self, sweep_id: str) -> None:
        from farm.store import tracking  # mlflow: not for --dry-run

        self.state["sweep"] = sweep_id
        console.print(f"sweep [bold]{sweep_id}[/] - {self.state['total']} trial(s) of grid {self.grid}, {self.repeats} repeat(s); "
                      f"tracking {self.uri}")
        exp_id = tracking.sweep_experiment_id(self.uri, sweep_id)
        local = "" if self.uri.startswith(("http://", "https://")) else f" (once `mlflow ui --backend-store-uri {self.uri}` runs)"
        console.print(f"MLflow run: {mlflow_run_link(self.uri, exp_id, sweep_id)}{local}", markup=False)
        console.print(f"its trials: {mlflow_trials_link(self.uri, exp_id, sweep_id)}", markup=False)

    def on_schedule(self, line: str) -> None:
        console.print(line, markup=False)  # where the order of trials comes from (farm/run/estimate.py)

    def on_accelerator(self, line: str) -> None:
        console.print(line, markup=False)  # the GPU model `accelerator_type: auto` resolved to

    def on_lease(self, line: str) -> None:
        console.print(line, markup=False)  # a resume waiting for the sweep's other driver to end

    def on_ray(self, url: str | None, local: bool) -> None:
        from farm.run.jobs import dashboard_line, dashboard_link, token_hint

        link = dashboard_link(url)
        if link:
            console.print(dashboard_line(link, local=local, hint=token_hint()), markup=False)
            self.state["dashboard_closes"] = local

    def on_trial(self, kind: str, job, result) -> None:
        elapsed = time.monotonic() - self.state["t0"]
        if kind == "started":
            if job.trial.node_control_of and job.attempt == 1:
                self.state["total"] += 1  # the baseline repeated on one node (a node control)
                self.progress.total += 1
            self.progress.started(job.trial)
            console.print(f"[{elapsed:6.0f}s] start   {job.trial.label} ({flags_text(job.trial)}) attempt {job.attempt}")
        elif kind == "retry":
            self.progress.retried(job.trial)
            console.print(f"[{elapsed:6.0f}s] retry   {job.trial.label}: {result.status.value} ({result.reason})",
                          markup=False)
        elif kind == "finished":
            self.state["done"] += 1
            self.progress.finished(job.trial, result.status == Status.ok)
            primary = self.study.grid_primary_profile(self.grid)
            tps = _primary_tps(result, primary)
            extra = f"{tps[0]:,.0f} tok/s on {tps[1]}" if tps else (result.reason or "")
            if self.study.profiles[primary].capacity is not None and result.runs_of(primary):
                v = _capacity(self.study, primary, result)
                extra = f"capacity {v.interval_text if v.capacity is None else f'{v.capacity:g}'} on {primary} " \
                        f"({len(v.curve)} runs)"
            console.print(f"[{elapsed:6.0f}s] [{self.state['done']}/{self.state['total']}] {result.status.value:<22} "
                          f"{job.trial.label}" + (f": {extra}" if extra else ""))
        elif kind == "pass_finished":
            console.print(f"[{elapsed:6.0f}s] pass {job.order_seed + 1} {result.status.value:<15} {job.trial.label}: "
                          f"{len(result.runs)} more run(s)")

    def on_pass(self, p) -> None:
        elapsed = time.monotonic() - self.state["t0"]
        head = f"[{elapsed:6.0f}s] repeats auto, "
        if p.done:
            console.print(head + f"done after {p.pass_index - 1} pass(es), {p.spent} of {p.budget} runs: {p.reason}",
                          markup=False)
        else:
            console.print(head + f"pass {p.pass_index} ({p.runs} runs, {p.spent} of {p.budget} spent): {p.reason}",
                          markup=False)

    def on_rung(self, p) -> None:  # a halving rung, or a step of a local search
        elapsed = time.monotonic() - self.state["t0"]
        p = p.model_copy(update={"reason": readable_ids(p.reason, self.names)})
        what = "local search" if self.strategy == "local" else "halving"
        spent = (f"{p.spent_gpu_hours:.3f} of {p.budget_gpu_hours:g}" if p.budget_gpu_hours is not None
                 else f"{p.spent_gpu_hours:.3f}")
        if p.done:
            console.print(f"[{elapsed:6.0f}s] {what} done, {spent} GPU-hours spent: {p.reason}", markup=False)
        else:
            console.print(f"[{elapsed:6.0f}s] {what} {p.reason} (~{p.estimate_gpu_hours:.3f} GPU-hours; "
                          f"{spent} spent)", markup=False)
        self.state["halving" if self.strategy != "local" else "local"] = p


def _print_fit(uri: str, study: Study, outcome) -> None:
    """The memory-fit predictions against the KV-cache tokens the engines reported, where a model
    exists (farm/run/memory.py `record_check`, which stores them with the sweep)."""
    from farm.run.memory import record_check  # predicted vs reported KV-cache tokens, where a model exists

    from farm.run.sweep_report import fit_accelerator  # mlflow: not for --dry-run

    fit_lines = record_check(uri, outcome.sweep_id, study, outcome.results)
    if fit_lines and (gpu := fit_accelerator(study, outcome.results)):  # a fit is per GPU model
        fit_lines[0] += f" (predicted for the memory of one {gpu})"
    for line in fit_lines:
        console.print(line, markup=False)


def run_and_report(plan) -> None:
    """Run the sweep as planned (`plan`: farm/run/sweep_plan.py's `SweepPlan`, which imports this
    module), showing its progress (the driver's events, farm/run/events.py), then report it."""
    from farm.run import driver  # ray and mlflow (seconds): not for --dry-run
    from farm.store import tracking  # mlflow, as above

    study, grid, trials, only, strategy, start = plan.study, plan.grid, plan.trials, plan.only, plan.strategy, plan.start
    tracking_uri, command, pruned = plan.tracking_uri, plan.command, plan.pruned

    uri = tracking_uri or tracking.default_tracking_uri()

    state = {"done": 0, "t0": time.monotonic(), "total": len(trials) if only is None else len(only)}
    progress = Progress(study, grid, [t for t in trials if only is None or t.id in only], state["total"])

    names = {t.id: t.label for t in trials}
    if strategy == "local" and start:  # the repaired trials a search races are named too
        from farm.run.local_search import search_trials

        names |= {t.id: t.label for t in search_trials(study, trials, [])}
    shown = _Shown(plan, uri, state, progress, names)

    # Live progress for a person at a terminal only: never in --quiet or --json, nor into a pipe or a log.
    live = Live(get_renderable=lambda: Text(progress.line(), style="bold"), console=console, refresh_per_second=1,
                transient=True) if terminal.live() else nullcontext()
    try:
        with live:
            # the driver falls back on the default store as `uri` does, and on the grid's experiment
            outcome = driver.run_sweep(plan, shown)
    except KeyboardInterrupt:  # before the sweep's first trial started, or while its results were read
        console.print("interrupted" + ("; resume with:" if state.get("sweep") else " before the sweep started"))
        if state.get("sweep"):
            terminal.answer(f"  {resume_command(command, state['sweep'])}")
        raise SystemExit(130) from None
    # what the sweep ran with: `accelerator_type: auto` resolved, halving's pruning redone for that GPU
    study = outcome.study or study
    pruned = outcome.pruned if outcome.pruned is not None else pruned
    if outcome.skipped:
        console.print(f"resumed: {len(outcome.skipped)} trial(s) already finished were not run again")
    print_summary(study, grid, outcome.results)
    if outcome.interrupted:
        console.print("interrupted: engines stopped, sweep marked killed. Resume with:")
        # one line, never wrapped: it is pasted
        terminal.answer(f"  {resume_command(command, outcome.sweep_id)}")
        terminal.emit_json({"sweep_id": outcome.sweep_id, "status": "killed",
                            "resume": resume_command(command, outcome.sweep_id)})
        raise SystemExit(130)
    from farm.run.sweep_report import finish  # mlflow, as above

    pending = [t for t in trials if t.id not in {r.trial.id for r in outcome.results}]
    _print_fit(uri, study, outcome)
    if strategy == "local":  # trials the search did not race are not pending: the search chose not to
        from farm.analysis.local_search import path_lines
        from farm.run.local_search import rung_study as step_study

        search = state.get("local")
        if search is not None:
            for line in path_lines(search, {t.id: t.label for t in trials}):
                console.print(line, markup=False)
            if search.steps:
                from farm.analysis.local_search import step_rung

                first = step_rung(1, study.grid_primary_profile(grid), study.profiles[study.grid_primary_profile(grid)].requests)
                study = step_study(study, first)
        pending = []
    if strategy == "halving":  # a stopped trial is an answer, not a pending one; the rungs' profiles join the study
        from farm.analysis.halving import rung_study, study_rungs, summary_lines

        if state.get("halving") is not None:
            for line in summary_lines(state["halving"], {t.id: t.label for t in trials}):
                console.print(line, markup=False)
        study, pending = rung_study(study, study_rungs(study, grid, len(trials) - len(pruned or {}))), []
    finish(study, grid, outcome, uri, pending=pending,
           resume_line=resume_command(_without_trial_options(command), outcome.sweep_id) if pending else None,
           dashboard_closed=state.get("dashboard_closes", False))
