"""The driver's side of `--strategy local`: run the steps farm/analysis/local_search.py plans.

Effects layer (Ray, MLflow), modelled on farm/run/halving.py: every decision comes from the pure
planner, replayed from what MLflow holds, so `--resume SWEEP_ID` continues at the step the stored
results say the search stands at. A trial is one MLflow child run however many steps race it:
its first step is logged by the driver as the trial's run, its later steps are appended to it, and
every run carries its step as its pass (files under `files/pass-N`). Each job is stored as it
ends, so a machine lost mid-step costs the trial in flight. The path (each step: who raced, what
each neighbour showed, where the search went) goes to the sweep's run as `local_search.json`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from farm.analysis import local_search as ls
from farm.analysis.halving import Rung, merge_rung
from farm.analysis.outcome import TRANSIENT
from farm.analysis.results import HeldSpan, Status, TrialResult
from farm.run.halving import BUDGET_TAG, STRATEGY_TAG
from farm.store import tracking
from farm.study.grid import RUN_OVERHEAD_S, MeasuredDurations, run_seconds, trial_starts
from farm.study.spec import Study
from farm.study.trial import Trial

PLAN_ARTIFACT = "local_search.json"
START_TAG = "farm.start"


def knob_flags(trials: list[Trial]) -> dict[str, set[str]]:
    """Trial id -> the flags its knobs rendered (a knob is the coordinate, not its flags)."""
    from farm.engines import get_engine  # the engine renders its own knobs

    out = {}
    for t in trials:
        try:
            out[t.id] = set(get_engine(t.engine).render_knobs(_online(t, t.knobs), {}))
        except Exception:  # noqa: BLE001 - a knob the grid rendered once renders again; if not, no flag is hidden
            out[t.id] = set()
    return out


def _online(t: Trial, knobs: dict) -> dict:
    # A quantization the model variant already has is no flag (farm/study/grid.py resolves it so).
    return {k: v for k, v in knobs.items() if k != "quantization" or t.flags.get("quantization") is not None}


def effective_knobs(trials: list[Trial]) -> dict[str, dict]:
    """Trial id -> its knobs that change what the engine is given: a knob at the value that renders
    no flag (kv_cache_dtype auto, speculative false, a limit left unset) is the engine's default,
    the same as a knob the block did not set, so two trials that start the same server sit at the
    same coordinates."""
    from farm.engines import get_engine

    out = {}
    for t in trials:
        engine, kept = get_engine(t.engine), {}
        for k, v in t.knobs.items():
            try:
                rendered = engine.render_knobs(_online(t, {k: v}), {})
            except Exception:  # noqa: BLE001 - kept as given when it cannot be rendered alone
                rendered = {k: v}
            if rendered or (k == "quantization" and t.flags.get("quantization") is None and v not in (None, "none")):
                kept[k] = v
        out[t.id] = kept
    return out


def estimates(study: Study, grid: str, trials: list[Trial], measured: MeasuredDurations | None = None) -> dict[str, float]:
    """GPU-hours of one trial's job in a step and in the final comparison, before this search
    measured any: a cold engine start and the runs at what the study's earlier sweep measured
    (`measured`), else the seed's durations (farm/study/grid.py)."""
    if not trials:
        return {"step": 0.0, "final": 0.0}
    t = trials[0]
    gpus = max(t.gpus, 1)
    cold, _ = trial_starts(t, measured)
    primary = study.grid_primary_profile(grid)
    one = study.model_copy(update={"repeats": 1})
    primary_run = run_seconds(one, t.model_copy(update={"profiles": [primary]}), measured=measured) - RUN_OVERHEAD_S
    step = cold + ls.STEP_REPEATS * (max(primary_run, 0.0) / ls.STEP_SHRINK + RUN_OVERHEAD_S)
    final = cold + ls.FINAL_REPEATS * run_seconds(one, t.model_copy(update={"profiles": study.grid_profiles(grid)}),
                                                  measured=measured)
    return {"step": step * gpus / 3600, "final": final * gpus / 3600}


def raceable(study: Study, trials: list[Trial], start: str) -> list[Trial]:
    """The trials a search may race: not the ones whose numbers would mean nothing (speculative
    decoding on dummy weights) or that the memory-fit model says cannot start; the start always."""
    from farm.analysis.outcome import trial_not_measurable
    from farm.run.memory import unfit_trials

    unfit = unfit_trials(study, trials)
    return [t for t in trials if t.id == start or not (
        t.node_control_of or t.id in unfit
        or (study.dummy_output_dependent == "skip" and trial_not_measurable(t) is not None))]


def plan_of(study: Study, grid: str, trials: list[Trial], start: str, results: list[TrialResult],
            measured: MeasuredDurations | None = None) -> ls.SearchPlan:
    profiles = study.grid_profiles(grid)
    ranked = raceable(study, trials, start)
    return ls.plan(start, ranked, ls.coordinates(ranked, knob_flags(ranked), effective_knobs(ranked)), results,
                   primary=study.grid_primary_profile(grid), requests={p: study.profiles[p].requests for p in profiles},
                   profiles=profiles, budget_gpu_hours=study.budget_gpu_hours,
                   trial_estimate_gpu_hours=estimates(study, grid, [t for t in ranked if t.id == start], measured),
                   min_success_rate=study.min_success_rate)


def rung_study(study: Study, rung: Rung) -> Study:
    """The study with the step's shortened profile added (`<primary>.rung1`)."""
    from farm.analysis.halving import rung_study as add_rungs

    return add_rungs(study, [rung])


def run_local(study: Study, grid: str, trials: list[Trial], *, start: str, tracking_uri: str, exp_id: str,
              sweep_id: str, make_job: Callable[[Trial, Rung], object],
              run_jobs: Callable[[list, Callable[[TrialResult], None]], list[TrialResult]],
              on_step: Callable[[ls.SearchPlan], None] = lambda p: None,
              measured: MeasuredDurations | None = None) -> ls.SearchPlan:
    """Step after step until the planner says done; returns its last plan."""
    by_id = {t.id: t for t in trials}
    c = tracking.client(tracking_uri)
    c.set_tag(sweep_id, STRATEGY_TAG, "local")
    c.set_tag(sweep_id, BUDGET_TAG, "" if study.budget_gpu_hours is None else repr(float(study.budget_gpu_hours)))
    c.set_tag(sweep_id, START_TAG, start)
    while True:
        stored = tracking.load_results(tracking_uri, sweep_id)
        p = plan_of(study, grid, trials, start, stored, measured)
        on_step(p)
        _record(tracking_uri, sweep_id, p)
        if p.done:
            return p
        rung = p.rung
        assert rung is not None
        previous = {r.trial.id: r for r in stored}
        run_ids = tracking.trial_run_ids(tracking_uri, sweep_id)
        jobs = [make_job(by_id[t], rung) for t in p.trials]
        done: list[str] = []  # the trials of this step stored so far

        def store(new: TrialResult, rung: Rung = rung) -> None:
            tid = new.trial.id
            if new.status in TRANSIENT or new.status == Status.cancelled:
                return  # nothing measured: the planner asks for it again
            if tid in previous and tid in run_ids:
                merged = merge_rung(previous[tid], new, rung)
                tracking.append_pass(tracking_uri, run_ids[tid], merged, new, rung.index,
                                     Path(new.artifacts_dir) if new.artifacts_dir else None)
            else:
                first = new.model_copy(update={
                    "trial": by_id[tid].model_copy(update={"profiles": list(rung.profiles), "profile_repeats": {}}),
                    "runs": [r.model_copy(update={"pass_index": rung.index}) for r in new.runs],
                    "spans": [HeldSpan(pass_index=rung.index, started_at=new.started_at, finished_at=new.finished_at,
                                       node=new.node, engine_reported=dict(new.engine_reported))]
                    if new.started_at and new.finished_at else []})
                tracking.log_trial(tracking_uri, exp_id, sweep_id, first,
                                   Path(new.artifacts_dir) if new.artifacts_dir else None)
            done.append(tid)

        run_jobs(jobs, store)
        if not done:
            stop = p.model_copy(update={"done": True, "stop": "failed", "reason": f"{p.reason}: measured nothing"})
            on_step(stop)
            _record(tracking_uri, sweep_id, stop)
            return stop


def _record(uri: str, sweep_id: str, p: ls.SearchPlan) -> None:
    c = tracking.client(uri)
    c.log_text(sweep_id, json.dumps(p.model_dump(mode="json"), indent=1), PLAN_ARTIFACT)
    c.set_tag(sweep_id, "farm.local_search_gpu_hours", f"{p.spent_gpu_hours:.4f}")


def recorded_plan(uri: str, sweep_id: str) -> ls.SearchPlan | None:
    raw = tracking.read_artifact(uri, sweep_id, PLAN_ARTIFACT)
    if raw is None:
        return None
    try:
        return ls.SearchPlan.model_validate_json(raw)
    except ValueError:  # written by a farm with another plan schema: the stored results still tell
        return None
