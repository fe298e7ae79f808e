"""What a search records on its sweep's run, written and read back (names in farm/store/schema.py).

`--strategy halving` and `--strategy local` (farm/run/halving.py, farm/run/local_search.py) tag the
sweep's run with the strategy, its budget and a local search's start, so that `--resume` without
--strategy continues as the sweep ran and `farm report` reads it as one; a local search records its
per-trial price once (a resume and a report replay at it) and its plan after every job; halving
records its last plan and what each rung spent; `--repeats auto` the trials each later pass is
planned to run. The memory-fit check (farm/run/memory.py) tags each
trial's child run with its predicted and reported KV-cache tokens, and its lines go to the sweep's
run. A sweep stored before one of these records existed lacks it: each reader then says None.
"""

from __future__ import annotations

import json

from farm.analysis import halving
from farm.analysis import local_search as ls
from farm.store import schema as S
from farm.store import tracking


def record_strategy(uri: str, sweep_id: str, strategy: str, budget_gpu_hours: float | None, *,
                    start: str | None = None) -> None:
    """The strategy (one of `schema.SEARCH_STRATEGIES`) and budget the sweep runs with, and a local
    search's start trial; a resume with a new budget records that one."""
    c = tracking.client(uri)
    c.set_tag(sweep_id, S.STRATEGY_TAG, strategy)
    c.set_tag(sweep_id, S.BUDGET_TAG, "" if budget_gpu_hours is None else repr(float(budget_gpu_hours)))
    if start is not None:
        c.set_tag(sweep_id, S.START_TAG, start)


def stored_strategy(uri: str, sweep_id: str) -> tuple[str, float | None] | None:
    """The strategy and budget a sweep ran with, from its run's tags (halving or local); None for a grid sweep."""
    tags = tracking.client(uri).get_run(sweep_id).data.tags
    if tags.get(S.STRATEGY_TAG) not in S.SEARCH_STRATEGIES:
        return None
    budget = tags.get(S.BUDGET_TAG) or None
    return tags[S.STRATEGY_TAG], float(budget) if budget else None


# --------------------------------------------------------------------------------------
# --repeats auto


def record_auto_pass(uri: str, sweep_id: str, pass_index: int, trials: list[str]) -> None:
    """The trials pass `pass_index` of `--repeats auto` is planned to run, as it starts."""
    tracking.client(uri).set_tag(sweep_id, S.auto_pass_tag(pass_index), json.dumps(trials))


def recorded_auto_passes(uri: str, sweep_id: str) -> dict[int, list[str]]:
    """Each recorded pass's planned trials by pass number; empty for a sweep stored before they were
    recorded (or one with no later pass)."""
    out: dict[int, list[str]] = {}
    for key, value in tracking.client(uri).get_run(sweep_id).data.tags.items():
        if key.startswith(S.AUTO_PASS_TAG_PREFIX) and key[len(S.AUTO_PASS_TAG_PREFIX):].isdigit():
            try:
                trials = json.loads(value)
            except ValueError:
                continue
            if isinstance(trials, list) and all(isinstance(t, str) for t in trials):
                out[int(key[len(S.AUTO_PASS_TAG_PREFIX):])] = trials
    return out


# --------------------------------------------------------------------------------------
# halving


def record_halving(uri: str, sweep_id: str, plan: halving.RungPlan, summary: list[str]) -> None:
    """The rungs' last plan, its summary (`halving.summary_lines`), what they spent and each rung's share."""
    c = tracking.client(uri)
    c.log_text(sweep_id, "\n".join(summary) + "\n", S.HALVING_SUMMARY_ARTIFACT)
    c.log_text(sweep_id, json.dumps(plan.model_dump(mode="json"), indent=1), S.HALVING_PLAN_ARTIFACT)
    c.set_tag(sweep_id, S.HALVING_GPU_HOURS_TAG, f"{plan.spent_gpu_hours:.4f}")
    for r, h in plan.spent_by_rung.items():
        c.log_metric(sweep_id, S.halving_rung_metric(r), h)


def recorded_halving_plan(uri: str, sweep_id: str) -> halving.RungPlan | None:
    """The plan the driver recorded when the sweep's rungs were done; None before that (a sweep
    interrupted mid-rung), or for a grid sweep."""
    raw = tracking.read_artifact(uri, sweep_id, S.HALVING_PLAN_ARTIFACT)
    if raw is None:  # a grid sweep, or one interrupted mid-rung
        return None
    try:
        return halving.RungPlan.model_validate_json(raw)
    except ValueError:  # written by a farm with another plan schema: the stored results still tell
        return None


# --------------------------------------------------------------------------------------
# local search


def record_local_search_estimate(uri: str, sweep_id: str, estimate: dict[str, float]) -> None:
    """The per-trial price ({"step": h, "final": h}) the search first priced its steps at."""
    tracking.client(uri).set_tag(sweep_id, S.LOCAL_SEARCH_ESTIMATE_TAG, json.dumps(estimate))


def recorded_local_search_estimate(uri: str, sweep_id: str) -> dict[str, float] | None:
    """The per-trial estimate the search first priced its steps at (on the sweep's run), or None."""
    raw = tracking.client(uri).get_run(sweep_id).data.tags.get(S.LOCAL_SEARCH_ESTIMATE_TAG)
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    if isinstance(value, dict) and {"step", "final"} <= value.keys():
        return {k: float(value[k]) for k in ("step", "final")}
    return None


def record_local_search(uri: str, sweep_id: str, plan: ls.SearchPlan) -> None:
    """The search's plan as it stands, and what it spent so far."""
    c = tracking.client(uri)
    c.log_text(sweep_id, json.dumps(plan.model_dump(mode="json"), indent=1), S.LOCAL_SEARCH_PLAN_ARTIFACT)
    c.set_tag(sweep_id, S.LOCAL_SEARCH_GPU_HOURS_TAG, f"{plan.spent_gpu_hours:.4f}")


def recorded_local_search_plan(uri: str, sweep_id: str) -> ls.SearchPlan | None:
    raw = tracking.read_artifact(uri, sweep_id, S.LOCAL_SEARCH_PLAN_ARTIFACT)
    if raw is None:
        return None
    try:
        return ls.SearchPlan.model_validate_json(raw)
    except ValueError:  # written by a farm with another plan schema: the stored results still tell
        return None


# --------------------------------------------------------------------------------------
# the memory-fit check


def record_memory_fit(uri: str, sweep_id: str, trial_tags: dict[str, dict[str, str]], lines: list[str]) -> None:
    """Each trial's check on its child run (`schema.kv_check_tags`), the lines on the sweep's run."""
    runs = tracking.trial_run_ids(uri, sweep_id)
    c = tracking.client(uri)
    for trial, values in trial_tags.items():
        if trial in runs:
            for k, v in values.items():
                c.set_tag(runs[trial], k, v)
    if lines:
        c.log_text(sweep_id, "\n".join(lines) + "\n", S.MEMORY_FIT_ARTIFACT)


def recorded_kv_predictions(uri: str, sweep_id: str) -> dict[str, int]:
    """Trial -> the KV-cache tokens the sweep predicted for it (`record_memory_fit`'s tags on its child runs)."""
    out = {}
    for run in sorted(tracking.trial_runs(uri, sweep_id), key=lambda r: r.info.start_time or 0):
        trial, value = run.data.tags.get(S.TRIAL_TAG), run.data.tags.get(S.KV_PREDICTED_TAG)
        if trial and value and value.isdigit():
            out[trial] = int(value)  # the latest run of a trial wins, as load_results reads it
    return out
