"""`guidellm mock-server`: a real OpenAI-compatible HTTP server with tunable latency, no GPU.

Its flags make configurations measurably better or worse (`--ttft-ms`, `--itl-ms`,
`--max-concurrent-requests`) and make failures on demand (`--fail-after-requests`, or a flag
it does not know), so every layer of farm except the GPU runs for real on a laptop or in CI.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import ClassVar

from farm.engines.base import Engine, FailurePattern
from farm.spec import EngineSpec

# Installed beside farm's own interpreter: the mock engine is part of farm's environment.
_GUIDELLM = str(Path(sys.executable).with_name("guidellm"))


class MockEngine(Engine):
    name = "mock"
    default_launcher: ClassVar[list[str]] = [_GUIDELLM, "mock-server"]
    model_arg = "model"
    ready_path = "/health"
    uses_gpus = False
    failure_patterns: ClassVar[list[FailurePattern]] = [
        # click's own usage errors, e.g. "Error: No such option: --turbo"
        FailurePattern(r"^Error: (No such option|Invalid value|Got unexpected extra argument|Option .* requires)",
                       "invalid_flags", "mock-server rejected its arguments"),
        FailurePattern(r"(address already in use|Errno 98)", "port_in_use", "the port was already taken"),
        FailurePattern(r"^(MemoryError|.*Cannot allocate memory)", "oom", "out of memory"),
    ]

    def version_command(self, spec: EngineSpec) -> list[str] | None:
        return [self.launcher(spec)[0], "--version"]
