"""The memory-fit prediction of each trial of a study: reads each model's config.json (where the
model is a local directory) and asks the pure predictor (farm/analysis/memory_fit.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from farm.analysis.memory_fit import GPU_MEMORY_BYTES, FitPrediction, KvCheck, NoPrediction, NotPredicted, trial_fit
from farm.engines import get_engine
from farm.errors import UserError
from farm.inputs import read_json_file
from farm.store import schema
from farm.analysis.memory_fit import check_lines as kv_check_lines
from farm.study.sections import AUTO_ACCELERATOR
from farm.study.spec import Study
from farm.study.trial import Trial


CONFIG_MAX_BYTES = 16 << 20  # a config.json is a few KiB; far past that it is not one


def _config(name: str) -> dict | NotPredicted | None:
    """A local model's config.json, read through the boundary (farm/inputs.py); None where there
    is none (a hub id: nothing to size it by here), `NotPredicted` (with why) where it is there
    but unusable, so that the trial's line says so instead of a traceback."""
    try:
        path = Path(name).expanduser() / "config.json"
        if not path.exists():
            return None
    except (OSError, ValueError):  # a name that is no path (a NUL byte, too long): a hub id
        return None
    try:
        data = read_json_file(path, what="model config", max_bytes=CONFIG_MAX_BYTES)
    except UserError as exc:
        return NotPredicted(exc.line())
    return data if isinstance(data, dict) else NotPredicted(f"{path}: is not a JSON object")


def predictions(study: Study, trials: list[Trial]) -> dict[str, FitPrediction | NoPrediction | None]:
    configs: dict[str, dict | NotPredicted | None] = {}
    out = {}
    for t in trials:
        if t.gpus == 0:
            out[t.id] = None
            continue
        if t.model not in configs:
            configs[t.model] = _config(t.model)
        model = study.models.get(t.model_key)
        out[t.id] = trial_fit(t.engine, t.all_flags, model.quantization if model else None, configs[t.model],
                              study.engines[t.engine].accelerator_type)
    return out


def why_not_predicted(study: Study, trial: Trial) -> str | None:
    """Why a GPU trial has no memory-fit prediction (`predictions` gave None): its engine has no
    memory model, its GPU model is not named or not known, its model has no config.json here (a
    hub id: farm looks nothing up), or its flags give no memory settings. None: a trial holding no
    GPU (nothing to size)."""
    if not trial.gpus:
        return None
    adapter = get_engine(trial.engine)
    if adapter.memory_reserve is None:
        return f"farm has no memory model for engine {trial.engine}"
    gpu = study.engines[trial.engine].accelerator_type if trial.engine in study.engines else None
    if gpu == AUTO_ACCELERATOR:
        return "accelerator_type auto: the GPU model comes from the cluster when the sweep starts"
    if gpu is None:
        return "no GPU model named (the study's accelerator_type, or --accelerator NAME)"
    if gpu not in GPU_MEMORY_BYTES:
        return f"farm does not know the memory of a {gpu} (it knows {', '.join(GPU_MEMORY_BYTES)})"
    config = _config(trial.model)
    if config is None:
        name = trial.model
        if name.startswith(("/", "~", ".")) or Path(name).expanduser().exists():
            return f"no config.json in {name}"
        return f"no config.json for {name} here (a hub id; no network)"
    model = study.models.get(trial.model_key)
    if adapter.memory_settings(trial.all_flags, model.quantization if model else None) is None:
        return f"farm's memory model for {trial.engine} cannot read this trial's flags"
    return None


def unfit_trials(study: Study, trials: list[Trial]) -> dict[str, str]:
    """Trial id -> why it cannot fit, for the trials the predictor rules out (never started)."""
    return {tid: p.reason for tid, p in predictions(study, trials).items() if p is not None and not p.fits}


UNPREDICTED = "so no fit, KV-cache tokens or state blocks"  # what a trial without a prediction goes without


def fit_line(p: FitPrediction | NoPrediction | None, why: str | None = None) -> str:
    """A trial's memory line; `why`: why there is no prediction (`why_not_predicted`) where `p` is None."""
    if p is None:
        return (f"memory: not predicted: {why}; {UNPREDICTED}" if why else
                "memory: no prediction (no memory model for this engine, model or GPU)")
    if isinstance(p, NoPrediction):
        return f"memory: not predicted: {p.reason}; {UNPREDICTED}"
    if not p.fits:
        return f"memory: pruned: does not fit: {p.reason}"
    if not p.static:
        # a hybrid model's state blocks (vLLM) beside the requests at once they must hold
        blocks = (f", ~{p.state_slots:,} state blocks for {p.max_running_requests:,} requests at once"
                  if p.state_slots is not None and p.max_running_requests is not None else "")
        return (f"memory: fits, ~{p.kv_cache_tokens:,} KV-cache tokens predicted{blocks} (per GPU: weights "
                f"{p.weights_gib} GiB, reserve {p.reserve_gib} GiB, KV cache {p.kv_cache_gib} GiB of {p.usable_gib} GiB)")
    # A static budget (SGLang): the pools are weights' remainder, split between state slots and KV cache.
    state = f"state {p.state_cache_gib} GiB ({p.state_slots:,} slots), " if p.state_slots is not None else ""
    running = f", at most {p.max_running_requests:,} requests at once" if p.max_running_requests is not None else ""
    return (f"memory: fits, ~{p.kv_cache_tokens:,} KV-cache tokens predicted{running} (per GPU: weights "
            f"{p.weights_gib} GiB, {state}KV cache {p.kv_cache_gib} GiB of {p.usable_gib} GiB static; "
            f"{p.reserve_gib} GiB outside it)")


def kv_checks(study: Study, results: list, predicted: Mapping[str, int] | None = None) -> list[KvCheck]:
    """Each trial's predicted KV-cache tokens beside what its engine reported. `predicted`: what
    the sweep recorded (trial -> tokens, its child runs' tags), which wins over predicting again
    here, where the models' config.json may be missing; a trial it lacks is predicted here."""
    predicted = dict(predicted or {})
    preds = predictions(study, [r.trial for r in results if r.trial.id not in predicted])
    out = []
    for r in results:
        p = preds.get(r.trial.id)
        tokens = predicted.get(r.trial.id, p.kv_cache_tokens if p is not None else None)
        if tokens is None:
            continue
        reported = r.engine_reported.get("kv_cache_tokens")
        running = r.engine_reported.get("max_running_requests")
        out.append(KvCheck(trial=r.trial.id, label=r.trial.label, predicted=tokens,
                           reported=reported if isinstance(reported, int) else None,
                           running_predicted=p.max_running_requests if p is not None else None,
                           running_reported=running if isinstance(running, int) else None))
    return out


def check_lines(study: Study, results: list) -> tuple[list[str], dict[str, dict[str, str]]]:
    """The predictor's error on this sweep's trials: predicted vs reported KV-cache tokens, one line
    each, and the tags that record both on each trial's child run."""
    checks = kv_checks(study, results)
    tags = {c.trial: schema.kv_check_tags(c.predicted, c.reported, c.error, c.running_predicted) for c in checks}
    return kv_check_lines(checks), tags


def record_check(uri: str, sweep_id: str, study: Study, results: list) -> list[str]:
    """Tag each trial's child run with its predicted (and reported) KV-cache tokens; the lines
    go to the sweep's run as `memory_fit.md` (farm/store/searches.py writes both)."""
    from farm.store import searches  # mlflow: only where a sweep's run is written

    lines, tags = check_lines(study, results)
    if not tags:
        return []
    searches.record_memory_fit(uri, sweep_id, tags, lines)
    return lines
