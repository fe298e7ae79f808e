"""Flat records of benchmark runs: the one input of selection and report, whatever their source.

A results file (the seed's `seed-results.json`, or one farm wrote after a sweep) and farm's own
`TrialResult`s both become a `Results`: the profiles that were run and one `RunRecord` per
benchmark run. Selection and report never look further back than this, so a report can be
recomputed at any time from stored results.

Runs of the same engine, model and flag set are one trial, whatever the file calls them: the
seed reports its baseline as `engine_vllm_default` on ShareGPT and as
`final_baseline_throughput` on the throughput profile, and both are the same server.

A record's flags are a mapping (name -> value, as the command line gives it); a results file writes
them as the CLI strings `--name=value` the seed's file uses, read into the mapping once, where the file is read.

The models live in farm/analysis/records_models.py and the results file's format in
farm/analysis/records_file.py; every name of theirs is importable from here, where selection, the
report, the store and the commands import it. This module turns farm's own `TrialResult`s into
records.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from farm.analysis.limits import effective_limits
from farm.analysis.quality_verdicts import quality_from_results
from farm.analysis.records_file import (METRIC_MAX, RESULTS_FORMAT_VERSION, check_plausible,  # noqa: F401  (re-exported)
                                        check_trial_ids, results_from_data, results_to_data, write_results_file)
from farm.analysis.records_models import (DECIDING_METRICS, ConfigKey, DecidingMetric, Flags,  # noqa: F401  (re-exported)
                                          ProfileInfo, Provenance, Results, RunRecord, canonical_flag, config_key,
                                          deciding_value, flag_set)
from farm.analysis.results import ProfileRun, Status, TrialResult
from farm.analysis.start_phases import start_cache, start_phases
from farm.engines import get_engine
from farm.engines.moe_config import moe_config_text
from farm.secrets import redact_flags
from farm.study.spec import EngineSpec, Study


# --------------------------------------------------------------------------------------
# farm's own TrialResults -> records


def profile_info(study: "Study", name: str) -> ProfileInfo:
    spec = study.profiles[name]
    data = spec.data
    fixed = data.fixed_lengths
    if data.kind == "sharegpt":
        dataset = str(data.path)
    elif fixed:
        dataset = data.kind
    else:  # lengths drawn around a mean: not a fixed output length the sanity checks may rely on
        dataset = f"synthetic, mean {data.prompt_tokens} in / {data.output_tokens} out, spread " + \
            ", ".join(f"{k}={v}" for k, v in data.spread.items())
    return ProfileInfo(
        total_requests=spec.requests,
        dataset=dataset,
        input_tokens=data.prompt_tokens if fixed else None,
        output_tokens=data.output_tokens if fixed else None,
        request_rate=spec.rate,
        max_concurrency=spec.max_concurrency,
        seed=spec.seed,
        description=spec.description or None,
        capacity=spec.capacity,
    )


def _latest_attempts(trial_results: list["TrialResult"]) -> list["TrialResult"]:
    # A retried trial has one result per attempt; only the last one says how it ended.
    latest: dict[str, "TrialResult"] = {}
    for tr in trial_results:
        have = latest.get(tr.trial.id)
        if have is None or tr.attempt >= have.attempt:
            latest[tr.trial.id] = tr
    return sorted(latest.values(), key=lambda tr: tr.trial.index)


def _trial_flags(tr: "TrialResult", study: "Study") -> dict[str, Any]:
    spec = study.engines.get(tr.trial.engine) or EngineSpec()
    return redact_flags(tr.trial.all_flags, get_engine(tr.trial.engine).secret_flags(spec))


def records_from_trials(trial_results: list["TrialResult"], study: "Study", *, grid: str | None = None,
                        sweep_id: str | None = None) -> Results:
    """farm's `TrialResult`s -> `Results`, so a sweep and a results file go through the same selection.

    A trial that failed before any benchmark ran still gets one record per profile, carrying its
    status and reason: the report must list it as not eligible, not forget it.
    """
    chosen = _latest_attempts(trial_results)
    names = study.grid_profiles(grid) if grid else list(study.profiles)
    used = names + [p for tr in chosen for p in tr.trial.profiles if p not in names]
    profiles = {p: profile_info(study, p) for p in used if p in study.profiles}
    records: list[RunRecord] = []
    versions: dict[str, str] = {}
    shared = _shared_hostnames(chosen)
    for tr in chosen:
        if tr.engine_version:
            versions.setdefault(tr.trial.engine, tr.engine_version)
        records += _trial_records(tr, study, profiles, shared)
    return Results(
        source=f"sweep {sweep_id}" if sweep_id else (study.source or study.name),
        profiles=profiles,
        records=records,
        primary_profile=study.grid_primary_profile(grid) if grid else study.primary_profile,
        study=study.name,
        grid=grid,
        sweep_id=sweep_id or (chosen[0].sweep_id if chosen else None),
        engine_versions=versions,
        deciding_metric=study.deciding_metric,
        quality=quality_from_results(chosen, study),
    )


def _shared_hostnames(chosen: list["TrialResult"]) -> set[str]:
    """Hostnames of more than one Ray node (several nodes on one machine, as in tests)."""
    ids: dict[str, set[str]] = {}
    for tr in chosen:
        for host, node_id in [(tr.node, tr.node_id)] + [(r.node, r.node_id) for r in tr.runs]:
            if host and node_id:
                ids.setdefault(host, set()).add(node_id)
    return {host for host, seen in ids.items() if len(seen) > 1}


def _node_label(host: str | None, node_id: str | None, shared: set[str]) -> str | None:
    """A node whose hostname other nodes share is named with its Ray node id's first 8 characters
    (as farm/analysis/plan.py names node controls)."""
    return f"{host}-{node_id[:8]}" if host in shared and node_id else host


def _trial_records(tr: "TrialResult", study: "Study", profiles: dict[str, ProfileInfo],
                   shared: set[str] = frozenset()) -> list[RunRecord]:
    t = tr.trial
    node = _node_label(tr.node, tr.node_id, shared)

    def run_node(run) -> str | None:
        # A later pass's run names its own node; a first-pass run ran on the trial's node, whatever
        # hostname a later pass stamped on it (the H200's lent machines are all 'vm').
        if run.node_id:
            return _node_label(run.node or tr.node, run.node_id, shared)
        return node if run.pass_index <= 1 else (run.node or node)

    common = dict(trial=t.id, name=t.name, engine=t.engine, model=t.model, flags=_trial_flags(tr, study),
                  node_control_of=t.node_control_of, node=node, command=tr.serve_command or None,
                  limits=effective_limits(t.engine, t.knobs or {}, t.all_flags, tr.engine_reported))
    out = []
    for run in tr.runs:
        metrics = run.metrics.model_dump(exclude_none=True) if run.metrics else {}
        asked = profiles[run.profile].total_requests if run.profile in profiles else None
        out.append(RunRecord(id=f"{t.label}/{run.profile}/{run.repeat}", profile=run.profile, repeat=run.repeat,
                             load=run.load, status=run.status, reason=run.reason, metrics=metrics, total_requests=asked,
                             provenance=provenance_of(tr, run.started_at, run.finished_at, run.pass_index, run),
                             **{**common, "node": run_node(run)}))
    ran = {run.profile for run in tr.runs}
    for profile in t.profiles:
        if profile not in ran and tr.status != Status.ok:
            out.append(RunRecord(id=f"{t.label}/{profile}/0", profile=profile, status=tr.status,
                                 reason=tr.reason or tr.status.value,
                                 total_requests=profiles[profile].total_requests if profile in profiles else None,
                                 provenance=provenance_of(tr, None), **common))
    return out


def provenance_of(tr: "TrialResult", started_at: float | None, finished_at: float | None = None,
                  pass_index: int = 1, run: "ProfileRun | None" = None) -> Provenance:
    """A trial's versions, GPU, weights and engine start, as one run of it carries them: the engine
    start is the one that served the run (a later pass or rung starts the engine again), unknown
    for a later pass stored without its start's facts. The run's machine and GPU samples where it
    recorded them; the machine's fingerprint where it is the trial's (a later pass elsewhere names
    its machine by key only)."""
    reported = _start_reported(tr, pass_index)
    cold = reported.get("compile_cache_hit")
    start = reported.get("ready_s")
    when = datetime.fromtimestamp(started_at, timezone.utc).isoformat(timespec="seconds") if started_at else None
    return Provenance(
        engine_version=tr.engine_version,
        client_version=f"guidellm {tr.guidellm_version}" if tr.guidellm_version else None,
        gpu=tr.gpu_name,
        gpus=tr.trial.gpus,
        weights=tr.trial.weights,
        engine_start_s=float(start) if isinstance(start, (int, float)) else None,
        engine_start_cold=(not cold) if isinstance(cold, bool) else reported.get("compile_cache_cold"),
        started_at=when,
        trial_wall_s=_rungs_wall(tr.engine_reported) or tr.held_seconds,
        warmup_s=round(sum(w.seconds for w in tr.warmup_runs), 2) if tr.warmup_runs else None,
        run_wall_s=_seconds(started_at, finished_at),
        start_phases=start_phases(reported),
        start_cache=start_cache(reported),
        start_cache_unusable=_text(reported.get("compile_cache_load_failure")),
        moe_config=moe_config_text(reported),
        engine_start_pass=pass_index if reported else None,
        machine_key=run.machine if run is not None else None,
        machine=tr.machine if run is not None and tr.machine is not None and run.machine == tr.machine.key else None,
        gpu_samples=run.gpu if run is not None else None,
    )


def _start_reported(tr: "TrialResult", pass_index: int) -> dict:
    """What the engine reported of the start that served a run of pass `pass_index`: its span's
    facts where recorded; the trial's own for its first pass otherwise; nothing (no start known)
    for a later pass without them, rather than the first pass's start in its place."""
    span = next((s for s in tr.spans if s.pass_index == pass_index), None)
    if span is not None and span.engine_reported is not None:
        return span.engine_reported
    return tr.engine_reported if pass_index <= 1 else {}


def _text(value: object) -> str | None:
    """A text the engine's log gave, or None (a stored trial may hold anything under its keys)."""
    return (value.strip() or None) if isinstance(value, str) else None


def _seconds(start: float | None, end: float | None) -> float | None:
    return round(end - start, 2) if start is not None and end is not None and end >= start else None


def _rungs_wall(reported: dict) -> float | None:
    """A halving sweep's trial held its GPUs once per rung (farm/analysis/halving.py keeps each
    rung's wall time): their sum, not the span from the first rung's start to the last one's end."""
    walls = reported.get("halving_wall_s")
    if not isinstance(walls, dict) or not walls:
        return None
    try:
        return round(sum(float(v) for v in walls.values()), 2)
    except (TypeError, ValueError):
        return None
