"""Engine adapters, one file each. Adding an engine is one new module and one line here."""

from __future__ import annotations

from farm.engines.base import Engine, Failure, FailurePattern, parse_cli_flags, render_flags
from farm.engines.mock import MockEngine
from farm.engines.sglang import SGLangEngine
from farm.engines.vllm import VLLMEngine

ENGINES: dict[str, Engine] = {e.name: e for e in (VLLMEngine(), SGLangEngine(), MockEngine())}


def get_engine(name: str) -> Engine:
    try:
        return ENGINES[name]
    except KeyError:
        raise KeyError(f"unknown engine '{name}' (known: {', '.join(sorted(ENGINES))})") from None


__all__ = ["ENGINES", "Engine", "Failure", "FailurePattern", "get_engine", "parse_cli_flags", "render_flags"]
