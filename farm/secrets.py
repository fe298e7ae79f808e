"""Secrets (tokens, API keys) reach the engine but never MLflow, reports or logs."""

from __future__ import annotations

import re
from typing import Any, Iterable

from farm.engines import get_engine
from farm.engines.base import SECRET_MASK

# Always treated as secret, whatever the study says (engines' own *_API_KEY variables are caught
# by the pattern below, so no engine needs naming here).
SECRET_ENV_NAMES = frozenset({
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN", "OPENAI_API_KEY",
    "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN", "RAY_AUTH_TOKEN",
})
_SECRETISH = re.compile(r"(TOKEN|SECRET|PASSWORD|API_KEY|APIKEY)$", re.IGNORECASE)


def is_secret_env(name: str, declared: Iterable[str] = ()) -> bool:
    return name in SECRET_ENV_NAMES or name in set(declared) or bool(_SECRETISH.search(name))


def secret_values(env: dict[str, str], declared_env: Iterable[str], flags: dict[str, Any],
                  secret_flags: Iterable[str]) -> list[str]:
    """Every secret value in an engine's environment and flags (short values are not scrubbed:
    masking '1' everywhere would destroy the log without protecting anything)."""
    declared = set(declared_env)
    values = [v for k, v in env.items() if is_secret_env(k, declared)]
    names = set(secret_flags)
    values += [str(v) for k, v in flags.items() if k in names and v not in (None, True, False)]
    return sorted({v for v in values if len(v) >= 6}, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str]) -> str:
    for value in secrets:
        text = text.replace(value, SECRET_MASK)
    return text


def redact_flags(flags: dict[str, Any], secret_flags: Iterable[str]) -> dict[str, Any]:
    names = set(secret_flags)
    return {k: (SECRET_MASK if k in names and v not in (None, False, True) else v) for k, v in flags.items()}


def redact_trial(trial, secret_flags: Iterable[str]):
    """The trial as it may be recorded: secret flag values masked (its id is unchanged)."""
    return trial.model_copy(update={"flags": redact_flags(trial.flags, secret_flags),
                                    "required_flags": redact_flags(trial.required_flags, secret_flags)})


def redact_study(study) -> dict:
    """The study as it may be stored beside a sweep (MLflow's `sweep/study.yaml`): values of
    secret environment variables and secret flags masked, everything else as written."""
    data = study.model_dump(mode="json")
    all_secret_flags: set[str] = set()
    for name, spec in study.engines.items():
        flags = get_engine(name).secret_flags(spec)
        all_secret_flags |= flags
        engine = data["engines"][name]
        engine["env"] = {k: (SECRET_MASK if is_secret_env(k, spec.secret_env) else v) for k, v in spec.env.items()}
        engine["flags"] = redact_flags(engine["flags"], flags)
    for grid in data.get("grids", {}).values():
        for block in grid.get("blocks", []):
            flags = get_engine(block["engine"]).secret_flags(study.engines[block["engine"]])
            block["flags"] = redact_flags(block.get("flags") or {}, flags)
            block["axes"] = {k: ([SECRET_MASK] * len(v) if k in flags else v) for k, v in (block.get("axes") or {}).items()}
            block["exclude"] = [redact_flags(rule, flags) for rule in block.get("exclude") or []]
    return data
