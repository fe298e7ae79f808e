"""The memory-fit prediction of each trial of a study: reads each model's config.json (where the
model is a local directory) and asks the pure predictor (farm/analysis/memory_fit.py)."""

from __future__ import annotations

import json
from pathlib import Path

from farm.analysis.memory_fit import FitPrediction, trial_fit
from farm.study.spec import Study
from farm.study.trial import Trial


def _config(name: str) -> dict | None:
    path = Path(name) / "config.json"
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return None


def predictions(study: Study, trials: list[Trial]) -> dict[str, FitPrediction | None]:
    configs: dict[str, dict | None] = {}
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


def unfit_trials(study: Study, trials: list[Trial]) -> dict[str, str]:
    """Trial id -> why it cannot fit, for the trials the predictor rules out (never started)."""
    return {tid: p.reason for tid, p in predictions(study, trials).items() if p is not None and not p.fits}


def fit_line(p: FitPrediction | None) -> str:
    if p is None:
        return "memory: no prediction (no memory model for this engine, model or GPU)"
    if not p.fits:
        return f"memory: pruned: does not fit: {p.reason}"
    if p.state_slots is None and p.max_running_requests is None:
        return (f"memory: fits, ~{p.kv_cache_tokens:,} KV-cache tokens predicted (per GPU: weights {p.weights_gib} GiB, "
                f"reserve {p.reserve_gib} GiB, KV cache {p.kv_cache_gib} GiB of {p.usable_gib} GiB)")
    # A static budget (SGLang): the pools are weights' remainder, split between state slots and KV cache.
    state = f"state {p.state_cache_gib} GiB ({p.state_slots:,} slots), " if p.state_slots is not None else ""
    running = f", at most {p.max_running_requests:,} requests at once" if p.max_running_requests is not None else ""
    return (f"memory: fits, ~{p.kv_cache_tokens:,} KV-cache tokens predicted{running} (per GPU: weights "
            f"{p.weights_gib} GiB, {state}KV cache {p.kv_cache_gib} GiB of {p.usable_gib} GiB static; "
            f"{p.reserve_gib} GiB outside it)")


def check_lines(study: Study, results: list) -> tuple[list[str], dict[str, dict[str, str]]]:
    """The predictor's error on this sweep's trials: predicted vs reported KV-cache tokens, one line
    each, and the tags that record both on each trial's child run."""
    from farm.analysis.memory_fit import prediction_error

    preds = predictions(study, [r.trial for r in results])
    lines, tags, errors = [], {}, []
    for r in results:
        p = preds.get(r.trial.id)
        reported = r.engine_reported.get("kv_cache_tokens")
        if p is None:
            continue
        err = prediction_error(p.kv_cache_tokens, reported if isinstance(reported, int) else None)
        tags[r.trial.id] = {"farm.kv_tokens_predicted": str(p.kv_cache_tokens),
                            **({"farm.kv_tokens_reported": str(reported)} if reported else {}),
                            **({"farm.kv_tokens_error_pct": f"{err * 100:+.2f}"} if err is not None else {})}
        # Where the model predicts the engine's own cap on requests at once (SGLang), it is checked too.
        running = r.engine_reported.get("max_running_requests")
        requests = ""
        if p.max_running_requests is not None:
            tags[r.trial.id]["farm.running_requests_predicted"] = str(p.max_running_requests)
            if isinstance(running, int):
                requests = f"; requests at once predicted {p.max_running_requests:,}, reported {running:,}"
        if err is not None:
            errors.append(abs(err))
            lines.append(f"  {r.trial.label}: predicted {p.kv_cache_tokens:,}, reported {reported:,} ({err * 100:+.2f} %)"
                         f"{requests}")
    if lines:
        lines.insert(0, f"memory-fit predictor, KV-cache tokens: largest error {max(errors) * 100:.2f} % over "
                        f"{len(errors)} trial(s)")
    return lines, tags


def record_check(uri: str, sweep_id: str, study: Study, results: list) -> list[str]:
    """Tag each trial's child run with its predicted (and reported) KV-cache tokens; the lines
    go to the sweep's run as `memory_fit.md`."""
    from farm.store import tracking

    lines, tags = check_lines(study, results)
    if not tags:
        return []
    runs = tracking.trial_run_ids(uri, sweep_id)
    c = tracking.client(uri)
    for trial, values in tags.items():
        if trial in runs:
            for k, v in values.items():
                c.set_tag(runs[trial], k, v)
    if lines:
        c.log_text(sweep_id, "\n".join(lines) + "\n", "memory_fit.md")
    return lines
