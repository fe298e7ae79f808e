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
    return (f"memory: fits, ~{p.kv_cache_tokens:,} KV-cache tokens predicted (per GPU: weights {p.weights_gib} GiB, "
            f"reserve {p.reserve_gib} GiB, KV cache {p.kv_cache_gib} GiB of {p.usable_gib} GiB)")
