"""SGLang: `python -m sglang.launch_server --model-path MODEL --flag=value ...`."""

from __future__ import annotations

from typing import Any, ClassVar

from farm.engines.base import Engine, FailurePattern
from farm.engines.vllm import _int_flag
from farm.spec import EngineSpec


class SGLangEngine(Engine):
    name = "sglang"
    default_launcher: ClassVar[list[str]] = ["python", "-m", "sglang.launch_server"]
    model_arg = "model-path"
    ready_path = "/health"
    reset_cache_path = "/flush_cache"
    metrics_path = "/metrics"
    failure_patterns: ClassVar[list[FailurePattern]] = [
        FailurePattern(r"error: (unrecognized arguments|argument [^:]+: invalid choice)", "invalid_flags",
                       "SGLang rejected its arguments"),
        FailurePattern(r"(torch\.OutOfMemoryError|CUDA out of memory)", "oom", "CUDA out of memory"),
        FailurePattern(r"address already in use", "port_in_use", "the port was already taken"),
    ]

    def gpus(self, flags: dict[str, Any]) -> int:
        return _int_flag(flags, "tp-size", "tensor-parallel-size", "tp") * _int_flag(flags, "dp-size", "data-parallel-size", "dp")

    def version_command(self, spec: EngineSpec) -> list[str] | None:
        launcher = self.launcher(spec)
        return [launcher[0], "-c", "import sglang; print(sglang.__version__)"]
