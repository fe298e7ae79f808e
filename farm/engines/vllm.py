"""vLLM: `vllm serve MODEL --flag=value ...`."""

from __future__ import annotations

from typing import Any, ClassVar

from farm.engines.base import Engine, FailurePattern
from farm.spec import EngineSpec
from farm.trial import Trial


def _int_flag(flags: dict[str, Any], *names: str, default: int = 1) -> int:
    for name in names:
        value = flags.get(name)
        if value not in (None, False):
            try:
                return int(value)
            except (TypeError, ValueError):
                raise ValueError(f"--{name} must be a whole number, got {value!r}") from None
    return default


class VLLMEngine(Engine):
    name = "vllm"
    default_launcher: ClassVar[list[str]] = ["vllm", "serve"]
    model_arg = None
    ready_path = "/health"
    reset_cache_path = "/reset_prefix_cache"
    metrics_path = "/metrics"
    failure_patterns: ClassVar[list[FailurePattern]] = [
        FailurePattern(r"error: (unrecognized arguments|argument [^:]+: invalid choice)", "invalid_flags",
                       "vLLM rejected its arguments"),
        FailurePattern(r"(torch\.OutOfMemoryError|CUDA out of memory)", "oom", "CUDA out of memory"),
        FailurePattern(r"address already in use", "port_in_use", "the port was already taken"),
        FailurePattern(r"(EngineDeadError|Worker proc \S+ died unexpectedly)", "engine_crashed", "the engine worker died"),
    ]

    def gpus(self, flags: dict[str, Any]) -> int:
        return _int_flag(flags, "tensor-parallel-size", "tp") * _int_flag(flags, "data-parallel-size", "dp")

    def env(self, spec: EngineSpec, trial: Trial) -> dict[str, str]:
        # Needed for POST /reset_prefix_cache before every benchmark run.
        return {"VLLM_SERVER_DEV_MODE": "1", **spec.env}

    def version_command(self, spec: EngineSpec) -> list[str] | None:
        return [self.launcher(spec)[0], "--version"]
