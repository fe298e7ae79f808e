"""The end of a sweep, and `farm report SWEEP_ID`: selection and report over the stored results.

Both read the trial results back from MLflow (never from best-so-far state in the driver), so a
resumed or re-analysed sweep reports exactly what a fresh one would.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from rich.markup import escape
from rich.rule import Rule

from farm.run import terminal
from farm.run.jobs import DASHBOARD_CLOSED
from farm.run.links import mlflow_run_link, mlflow_trials_link
from farm.run.terminal import console
from farm.store import schema, tracking
from farm.errors import SLONotMet, UserError
from farm.analysis.accelerator import gpu_models
from farm.analysis.records import Results, records_from_trials, write_results_file
from farm.report.capacity_text import capacity_line
from farm.report import (Report, profile_numbers, report_for, summary_markdown, trial_verdicts, verdict_line,
                         warning_groups, write_report_files)
from farm.analysis.results import TrialResult
from farm.study.spec import Study


class Why(str):
    """Why a sweep has no recommendation, and the exit code that says so (1: nothing eligible, the
    sweep failed; 3: no trial meets a capacity profile's SLO at its lowest load, `SLONotMet`)."""

    exit_code = 1


def _why(exc: UserError) -> Why:
    why = Why(exc.reason)
    why.exit_code = exc.exit_code if isinstance(exc, SLONotMet) else 1
    return why


def build(study: Study, grid: str | None, results: list[TrialResult], sweep_id: str, outdir: Path,
          strategy: str = "best", uri: str | None = None) -> tuple[Report | None, str | None, list[Path]]:
    """Report, or why there is none, and the files written (report.md, appendix.md, results.json,
    recommendation.txt, plots)."""
    records = records_from_trials(results, study, grid=grid, sweep_id=sweep_id)
    estimate = kept = None
    if uri and study.strategy == "local":
        from farm.store.searches import recorded_local_search_estimate, recorded_local_search_plan

        estimate, kept = recorded_local_search_estimate(uri, sweep_id), recorded_local_search_plan(uri, sweep_id)
    report, why, files = build_from_records(study, grid, records, outdir, strategy,
                                            extra=lambda r: _search_notes(r, study, grid, results, estimate),
                                            baseline=local_baseline(study, grid))
    if report is None and study.strategy == "local" and grid and study.start and why.exit_code == 1:
        why = _search_why(local_search_note(study, grid, results, estimate=estimate, kept=kept))
    return report, why, files


def _search_why(note) -> Why:
    """A local search that has answered nothing has no trial to select on the primary profile (its runs are
    on its rungs; only the final comparison measures the primary): say so in the search's own words, not
    as though every run had failed."""
    from farm.analysis.local_search import ending

    end = ending(note.plan, note.labels)
    return Why(f"the local search {end}" if end is not None else
               f"the local search is under way, no answer yet ({note.plan.reason})")


def local_baseline(study: Study, grid: str | None) -> str | None:
    """A local search's baseline is where it started: the command the user runs today."""
    if study.strategy != "local" or not grid or not study.start:
        return None
    from farm.analysis.start_command import start_of
    from farm.study.grid import expand

    return start_of(study, grid, expand(study, grid), study.start, key="start")[1]


def local_search_note(study: Study, grid: str, results: list[TrialResult], sweep_id: str | None = None,
                      estimate: dict[str, float] | None = None, kept=None):
    """The search's path replayed from its results (at the price the sweep recorded, `estimate`,
    with the repairs of its stored plan, `kept`), or that plan where it saw every stored result;
    and the final comparison."""
    recorded = kept.repairs if kept is not None else ()
    from farm.analysis.local_search import final_comparison
    from farm.analysis.start_command import start_of
    from farm.report.models import LocalSearchNote
    from farm.run.local_search import plan_of, search_trials
    from farm.study.grid import expand

    trials, start = start_of(study, grid, expand(study, grid), study.start or "", key="start")
    p = plan_of(study, grid, trials, start, results, estimate=estimate, recorded=recorded,
                recorded_steps=kept.steps if kept is not None else ())
    if kept is not None and kept.start == p.start and kept.spent_by_phase == p.spent_by_phase:
        # The sweep's own last plan saw every GPU-second stored: it knew which trials the memory-fit
        # model ruled out, where this machine may lack the models' config.json (as halving's report does).
        p = kept
    # the repaired trials the search raced are named too, and so is what a result recorded
    labels = {r.trial.id: r.trial.label for r in results} | {
        t.id: t.label for t in search_trials(study, trials, results, recorded)}
    return LocalSearchNote(sweep_id=sweep_id, plan=p, final=final_comparison(p, results), labels=labels)


def fit_accelerator(study: Study, results: list[TrialResult]) -> str | None:
    """The GPU model(s) the study held the sweep's GPU trials to (`auto` stored resolved): the
    memory the fits were predicted for."""
    return ", ".join(gpu_models(study, [r.trial for r in results])) or None


def _search_notes(report: Report, study: Study, grid: str | None, results: list[TrialResult],
                  estimate: dict[str, float] | None = None) -> None:
    """The local search's answer, the halving sweep's rungs and stops, and the memory-fit predictor's
    error, into the report."""
    from farm.report.models import HalvingNote, MemoryFitNote
    from farm.run.memory import kv_checks, unfit_trials

    report.memory_fit = [MemoryFitNote(checks=kv_checks(study, results), accelerator=fit_accelerator(study, results))]
    if study.strategy == "local" and grid and study.start:
        report.local_search = [local_search_note(study, grid, results, estimate=estimate)]
    if study.strategy == "halving" and grid:
        from farm.analysis.halving import plan_from_results
        from farm.study.grid import expand

        trials = expand(study, grid)
        report.halving = [HalvingNote(plan=plan_from_results(study, grid, trials, results, unfit_trials(study, trials)),
                                      labels={t.id: t.label for t in trials})]


def build_from_records(study: Study, grid: str | None, records: Results, outdir: Path | None,
                       strategy: str = "best", extra=None, baseline: str | None = None
                       ) -> tuple[Report | None, str | None, list[Path]]:
    """`build` over records already read from a store (`farm.store.base.SweepStore.records`).
    `outdir` None: the report alone, no files (`farm report` without --out skips matplotlib); else
    results.json, report.md, appendix.md, recommendation.txt and plots/ in it."""
    files = []
    if outdir is not None:
        outdir.mkdir(parents=True, exist_ok=True)
        files.append(write_results_file(records, outdir / schema.REPORT_RESULTS))
    try:
        report = report_for(records, study, strategy=strategy, grid=grid, baseline=baseline)
    except UserError as exc:  # e.g. no eligible trial: the sweep still has its results
        return None, _why(exc), files
    if extra is not None:
        extra(report)
    if outdir is None:
        return report, None, files
    # report.md, the appendix beside it (every trial's row and every run's figures) and the plots
    files += write_report_files(report, outdir)
    (outdir / schema.REPORT_RECOMMENDATION).write_text(report.selection.recommended.command + "\n")
    files.append(outdir / schema.REPORT_RECOMMENDATION)
    return report, None, files


def gpu_hours(results: list[TrialResult]) -> float:
    """GPU-hours the sweep's trials held: GPUs x (end - start) of each final attempt."""
    return sum(r.trial.gpus * (r.held_seconds or 0.0) for r in results) / 3600


def gpu_names(results: list[TrialResult]) -> str | None:
    """The GPU model(s) the sweep's GPU trials ran on, as the driver names them: GPU-hours are per model."""
    return ", ".join(sorted({r.gpu_name for r in results if r.trial.gpus and r.gpu_name})) or None


def summary_metrics(report: Report, hours: float | None) -> dict[str, float]:
    """The parent run's metrics: recommendation and baseline per profile, and their difference."""
    out: dict[str, float] = {}
    for profile, sides in profile_numbers(report).items():
        rec, base = sides.get("recommended", {}), sides.get("baseline", {})
        for metric in schema.SUMMARY_METRICS:
            if metric in rec:
                out[schema.recommended_metric(profile, metric)] = rec[metric]
            if metric in base:
                out[schema.baseline_metric(profile, metric)] = base[metric]
            if rec.get(metric) is not None and base.get(metric):
                out[schema.delta_metric(profile, metric)] = (rec[metric] / base[metric] - 1) * 100
    for ranking in report.selection.capacity:  # the experiment's table sets sweeps' capacities side by side
        row = ranking.row(ranking.recommended) if ranking.recommended else None
        if row is not None and row.capacity is not None:
            out[schema.recommended_metric(ranking.profile, "capacity")] = row.capacity
    if hours is not None:
        out[schema.GPU_HOURS_METRIC] = hours
    return out


def annotate(uri: str, sweep_id: str, report: Report | None, why: str | None, results: list[TrialResult],
             heading: str) -> None:
    """Write the answer onto the sweep's MLflow run (description, metrics, tags) and its trials' runs."""
    hours = gpu_hours(results)
    path = f"{schema.REPORT_DIR}/{schema.REPORT_MARKDOWN}"
    if report is None:
        failed = [r for r in results if r.status.value != "ok"]
        lines = [f"## {heading}", "", f"**No recommendation**: {why}", ""]
        lines += [f"- `{r.trial.label}`: {r.status.value}: {(r.reason or '')[:200]}" for r in failed]
        on = f" ({gpu_names(results)})" if gpu_names(results) else ""
        lines += ["", f"**GPU-hours**: {hours:.2f}{on}", ""]
        tracking.annotate_sweep(uri, sweep_id, note="\n".join(lines), metrics={schema.GPU_HOURS_METRIC: hours})
        return
    rec = report.selection.recommended
    verdicts = trial_verdicts(report)
    trial_tags = {t: {schema.RECOMMENDED_TAG: "true" if t == rec.trial else "false", schema.VERDICT_TAG: v}
                  for t, v in verdicts.items()}
    for r in results:  # a trial with no row on the primary profile (it failed) still gets its tags
        trial_tags.setdefault(r.trial.id, {schema.RECOMMENDED_TAG: "false",
                                           schema.VERDICT_TAG: f"failed: {r.status.value}"})
    verdict_figures = quality_marks(report, trial_tags)
    tracking.annotate_sweep(
        uri, sweep_id, note=summary_markdown(report, heading=heading, gpu_hours=hours, report_path=path,
                                       gpu_model=gpu_names(results)),
        metrics=summary_metrics(report, hours),
        tags={schema.RECOMMENDED_TRIAL_TAG: rec.trial, schema.RECOMMENDED_COMMAND_TAG: rec.command},
        trial_tags=trial_tags, trial_costs=trial_costs(report), quality=verdict_figures)


def quality_marks(report: Report, trial_tags: dict[str, dict[str, str]]) -> dict[str, dict[str, float]]:
    """The quality gate on each trial's run (issue 49): its status and reference as tags (added to
    `trial_tags`), and a gated trial's verdict figures (returned: trial id -> {name: value})."""
    figures: dict[str, dict[str, float]] = {}
    for trial, q in report.results.quality.items():
        tags = trial_tags.setdefault(trial, {})
        tags[schema.QUALITY_TAG] = q.status.why
        if q.status.reference is not None:
            tags[schema.QUALITY_REFERENCE_TAG] = q.status.reference.trial
        v = q.status.verdict
        if v is not None:
            figures[trial] = {k: getattr(v, k) for k in schema.QUALITY_VERDICT_METRICS if getattr(v, k) is not None}
    return figures


def trial_costs(report: Report) -> dict[str, dict[tuple[str, str], float]]:
    """Each priced trial's dollars per million output and total tokens per profile (none without a price)."""
    out: dict[str, dict[tuple[str, str], float]] = {}
    for tc in report.costs.trials if report.costs is not None else []:
        for pc in tc.profiles:
            for name, amount in zip(schema.COST_METRICS, (pc.usd_per_m_output, pc.usd_per_m_total)):
                if amount is not None:
                    out.setdefault(tc.trial, {})[(pc.profile, name)] = amount.value
    return out


def summary_json(study: Study, grid: str, outcome, uri: str, report: Report | None, why: str | None,
                 status: str, pending: list) -> dict:
    """What `farm sweep --json` prints: the answer and the counts, nothing to parse back out of text."""
    results = outcome.results
    failed = [r for r in results if r.status.value != "ok"]
    out = {
        "sweep_id": outcome.sweep_id,
        "status": status,
        "study": study.name,
        "grid": grid,
        "tracking_uri": uri,
        "mlflow_run": mlflow_run_link(uri, outcome.experiment_id, outcome.sweep_id),
        "mlflow_trials": mlflow_trials_link(uri, outcome.experiment_id, outcome.sweep_id),
        "recommended": None,
        "why_no_recommendation": why,
        "verdict": None,
        "profiles": {},
        "failures": [{"trial": r.trial.id, "label": r.trial.label, "status": r.status.value, "reason": r.reason,
                      "attempt": r.attempt} for r in failed],
        "counts": {"trials": len(results) + len(pending), "ok": len(results) - len(failed), "failed": len(failed),
                   "skipped": len(outcome.skipped), "pending": len(pending)},
        "warnings": {},
        "gpu_hours": round(gpu_hours(results), 4),
        # the GPU model the study held its GPU trials to (`auto` resolved): results are per GPU model
        "accelerator": fit_accelerator(study, results),
    }
    if report is not None:
        sel = report.selection
        rec = sel.recommended
        out["recommended"] = {"trial": rec.trial, "name": rec.name, "engine": rec.engine, "command": rec.command,
                              "profile": sel.primary_profile, "total_tps": rec.total_tps}
        out["verdict"] = verdict_line(report)
        verdicts = {v.profile: v for v in sel.verdicts}
        deltas = {r.profile: r for r in sel.comparison}
        for profile, sides in profile_numbers(report).items():
            row = dict(sides)
            if profile in deltas:
                d = deltas[profile]
                row["delta_pct"] = d.delta_pct
                if d.delta is not None:
                    row["delta_ci_pct"] = [d.delta.ci_low_pct, d.delta.ci_high_pct]
                    row["significant"] = d.delta.significant
            if profile in verdicts:
                row["verdict"] = verdicts[profile].decision
            out["profiles"][profile] = row
        for w in report.warnings:
            out["warnings"][w.code] = out["warnings"].get(w.code, 0) + 1
        out["capacity"] = {c.profile: {"decision": c.decision, "recommended": c.recommended, "unit": c.unit, "trials": [
            {"trial": r.trial, "label": r.label, "capacity": r.capacity, "high": r.high, "runs": r.runs,
             "total_tps": r.total_tps} for r in c.rows]} for c in report.selection.capacity}
    return out


def finish(study: Study, grid: str, outcome, uri: str, pending: list | None = None,
           resume_line: str | None = None, dashboard_closed: bool = False) -> None:
    """Store the report and the answer in MLflow, then print: checks grouped, where the results
    are, and the recommendation last (`--quiet`: the command and the sweep id; `--json`: the summary)."""
    pending = pending or []
    status = "partial" if pending else "finished"
    with tempfile.TemporaryDirectory() as tmp:
        report, why, files = build(study, grid, outcome.results, outcome.sweep_id, Path(tmp), uri=uri)
        # The answer onto the run before it is marked finished: a finished sweep always shows it.
        annotate(uri, outcome.sweep_id, report, why, outcome.results, heading=f"{study.name}: grid {grid}")
        # A sweep run in pieces (`--trial`) is not finished while trials of its grid are pending.
        tracking.finish_sweep(uri, outcome.sweep_id, status, files)
    link = mlflow_run_link(uri, outcome.experiment_id, outcome.sweep_id)
    terminal.emit_json(summary_json(study, grid, outcome, uri, report, why,
                                    status if report is not None else
                                    "slo_not_met" if getattr(why, "exit_code", 1) == SLONotMet.exit_code
                                    else "no_recommendation", pending))
    if report is not None and report.warnings:
        console.print(f"\nchecks ({len(report.warnings)} warning(s); each one in the report: "
                      f"farm report {outcome.sweep_id}):", markup=False)
        for line in warning_groups(report):
            console.print(f"  {line}", markup=False)
    console.print(f"\nsweep id: {outcome.sweep_id}  (report: farm report {outcome.sweep_id} --tracking-uri {uri})")
    # A tracking server has its own UI; a local store needs `mlflow ui` started over it.
    trials = mlflow_trials_link(uri, outcome.experiment_id, outcome.sweep_id)
    if uri.startswith(("http://", "https://")):
        console.print(f"results:  {link}", markup=False)
    else:
        console.print(f"results:  mlflow ui --backend-store-uri {uri}", markup=False)
        console.print(f"          then {link}", markup=False)
    console.print(f"trials:   {trials}  (throughput, TTFT, TPOT; best first)", markup=False)
    if dashboard_closed:
        console.print(DASHBOARD_CLOSED, markup=False)
    if pending:
        console.print(f"{len(pending)} trial(s) of the grid not run yet; run them with:")
        if resume_line:
            if terminal.mode() == "normal":
                terminal.answer(f"  {resume_line}")
    if report is None:
        console.print(Rule("no recommendation", style="bold red"))
        console.print(f"no recommendation: {why}", markup=False)
        if terminal.mode() == "quiet":
            print(f"error: no recommendation: {why}", file=sys.stderr)
            terminal.answer(f"sweep id: {outcome.sweep_id}")
        raise SystemExit(getattr(why, "exit_code", 1))
    rec = report.selection.recommended
    console.print(Rule("recommendation", style="bold green"))
    what = capacity_line(report) or f"{rec.total_tps:,.1f} total tok/s on {report.selection.primary_profile}"
    console.print(f"[bold green]recommended:[/] trial {escape(f'{rec.name or rec.trial}, {what}')}")
    terminal.answer(rec.command if terminal.mode() == "quiet" else f"  {rec.command}")
    evidence = verdict_line(report)
    if evidence:
        console.print(f"evidence: {evidence}", markup=False)
    if terminal.mode() == "quiet":
        terminal.answer(f"sweep id: {outcome.sweep_id}")
