"""`guidellm mock-server`: a real OpenAI-compatible HTTP server with tunable latency, no GPU.

Its flags make configurations measurably better or worse (`--ttft-ms`, `--itl-ms`,
`--max-concurrent-requests`) and make failures on demand (`--fail-after-requests`, or a flag
it does not know), so every layer of farm except the GPU runs for real on a laptop or in CI.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import sys
from pathlib import Path, PurePosixPath
import shlex
from typing import Any, ClassVar, Mapping, Sequence

from farm.engines.base import Engine, FailurePattern, render_flags
from farm.engines.flag_types import NON_NEGATIVE_INT, NON_NEGATIVE_NUMBER, POSITIVE_INT
from farm.study.spec import EngineSpec
from farm.study.trial import Trial

# Installed beside farm's own interpreter: the mock engine is part of farm's environment.
_GUIDELLM = str(Path(sys.executable).with_name("guidellm"))
# The admission gate in front of the mock-server (farm/engines/mock_gate.py), run by its path.
_GATE = str(Path(__file__).with_name("mock_gate.py"))
# What starts that guidellm's mock-server with torch imported only if used (a 2.8 s start -> 1.5 s
# on 2 cores): the same command line in the same interpreter (farm/engines/mock_launch.py).
_LAUNCH = str(Path(__file__).with_name("mock_launch.py"))


class MockEngine(Engine):
    name = "mock"
    default_launcher: ClassVar[list[str]] = [_GUIDELLM, "mock-server"]
    model_arg = "model"
    ready_path = "/health"
    uses_gpus = False
    loads_weights = False  # random tokens from no model: `weights: dummy` changes nothing
    # Its text is generated without a model: no flag of it changes an answer (numerics_flags stays empty).
    # Nothing in guidellm's mock-server gets faster after its first run (no JIT, no cache, no
    # allocator to grow): 5 runs of smoke_chat after a start, 4 configurations, no first run apart
    # (farm/analysis/drift.py). A default warm-up would only cost CI time (the smoke sweep 53-60 s
    # -> 79-90 s on 2 loaded cores); a profile's own warmup_requests still warms it.
    warms_up = False
    failure_patterns: ClassVar[list[FailurePattern]] = [
        # click's own usage errors, e.g. "Error: No such option: --turbo"
        FailurePattern(r"^Error: (No such option|Invalid value|Got unexpected extra argument|Option .* requires)",
                       "invalid_flags", "mock-server rejected its arguments"),
        FailurePattern(r"(address already in use|Errno 98)", "port_in_use", "the port was already taken"),
        FailurePattern(r"^(MemoryError|.*Cannot allocate memory)", "oom", "out of memory"),
        FailurePattern(r"exceeds the state blocks \(\d+\)", "oom", "too few state blocks for the requests at once"),
    ]

    # No admission limit asked: every request at once, which no count of state blocks holds.
    UNLIMITED: ClassVar[int] = 1_000_000

    # Not a mock-server flag: the GPUs a mock trial asks Ray for, standing in for a GPU engine's
    # tensor x data parallel size, so placement and GPU accounting run for real on machines
    # without GPUs (`axes: {gpus: [1, 2]}`). It is part of the trial (id, MLflow params) but is
    # never passed to the server, which would reject it.
    gpus_flag: ClassVar[str] = "gpus"
    # Not mock-server flags either: a GPU engine's start, simulated (bench/makespan.py). The
    # server starts after sleeping `start-s` seconds, or `warm-start-s` where this node's compile
    # cache already holds the trial's `graph` (a marker file there, written once the sleep is
    # over, as a real engine writes its cache while it starts: two cold starts at once are both cold).
    start_flags: ClassVar[tuple[str, ...]] = ("start-s", "warm-start-s", "graph")
    compile_flags: ClassVar[frozenset[str] | None] = frozenset({"graph"})

    # Not a mock-server flag either: N requests served at once, the rest queued, by a gate in front of
    # the server (farm/engines/mock_gate.py), so that latency grows with load past N the way a real
    # engine's batch limit makes it grow (the mock-server's own limit does not hold streamed requests).
    admission_flag: ClassVar[str] = "admission-limit"
    # Not a mock-server flag: the engine's own cap on requests at once (SGLang's mamba state slots
    # cap --max-running-requests): asked for more, the mock runs `slots` at once and its log says so
    # (`farm mock: max_running_requests=N`), as a real engine's start log does.
    slots_flag: ClassVar[str] = "slots"
    # Not a mock-server flag: a hybrid model's state blocks as vLLM holds them. Asked for more requests
    # at once (`admission-limit`, or no limit at all), the mock refuses to start and its log names the
    # most it would take, as vLLM's does; a search repairs the command from that line.
    state_blocks_flag: ClassVar[str] = "state-blocks"
    knob_renderers = {"max_running_requests": lambda n, k: {"admission-limit": n}}
    farm_flags: ClassVar[frozenset[str]] = frozenset({"gpus", "admission-limit", "slots", "start-s", "warm-start-s",
                                                       "graph", "state-blocks"})
    # What farm reads of them, and the latencies that make a mock configuration better or worse.
    flag_types = {"gpus": NON_NEGATIVE_INT, "admission-limit": POSITIVE_INT, "slots": POSITIVE_INT,
                  "state-blocks": POSITIVE_INT,
                  "start-s": NON_NEGATIVE_NUMBER,
                  "warm-start-s": NON_NEGATIVE_NUMBER, "ttft-ms": NON_NEGATIVE_NUMBER, "itl-ms": NON_NEGATIVE_NUMBER,
                  "max-concurrent-requests": POSITIVE_INT}

    def _whole(self, flags: Mapping[str, Any], flag: str) -> int | None:
        value = flags.get(flag)
        if value is None:
            return None
        if isinstance(value, str) and value.isdigit():  # a run record's flags are as the command line gives them
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"mock flag '{flag}' must be a whole number >= 1, got {value!r}")
        return value

    def _admission(self, flags: Mapping[str, Any]) -> int | None:
        """Requests at once: what `admission-limit` asks, capped by `slots`; None: no gate."""
        asked, slots = self._whole(flags, self.admission_flag), self._whole(flags, self.slots_flag)
        if asked is None and self._whole(flags, self.state_blocks_flag) is not None:
            asked = self.UNLIMITED
        if slots is None:
            return asked
        return slots if asked is None else min(asked, slots)

    def _gate(self, limit: int, host: str, port: int | None, report: bool = False,
              blocks: int | None = None) -> list[str]:
        listen = ["--listen-host", host] + (["--listen-port", str(port)] if port is not None else [])
        state = ["--state-blocks", str(blocks)] if blocks is not None else []
        return [sys.executable, _GATE, "--limit", str(limit), *state, *listen, *(["--report"] if report else []), "--"]

    def _server_command(self, spec: EngineSpec, trial: Trial, *, port: int, host: str | None,
                        gpu_ids: Sequence[str] | None) -> list[str]:
        limit = self._admission(trial.all_flags)
        if limit is None:
            return super().command(spec, trial, port=port, host=host, gpu_ids=gpu_ids)
        # The gate listens on the trial's port and starts the server on one of its own.
        return (self._gate(limit, host or spec.host, port, self.slots_flag in trial.all_flags,
                           self._whole(trial.all_flags, self.state_blocks_flag))
                + self.launcher(spec) + self.serve_args(trial))

    def serve_command_of(self, spec: EngineSpec, model: str, flags: Mapping[str, Any], weights: str = "real") -> str:
        inner = super().serve_command_of(spec, model, flags, weights)
        limit = self._admission(flags)
        if limit is None:
            return inner
        return shlex.join(self._gate(limit, spec.host, None, self.slots_flag in flags,
                                     self._whole(flags, self.state_blocks_flag))) + " " + inner

    def named_limits(self, log_text: str) -> dict[str, int]:
        m = re.search(r"exceeds the state blocks \((\d+)\); lower it to at most (\d+)", log_text)
        return {"state_blocks": int(m.group(1)), "running_requests_limit": int(m.group(2))} if m else {}

    def reported_capacity(self, log_text: str) -> dict[str, Any]:
        m = re.search(r"^farm mock: max_running_requests=(\d+)", log_text, re.M)
        return {"max_running_requests": int(m.group(1))} if m else {}

    def check_flags(self, flags: Mapping[str, Any]) -> None:
        self._admission(flags)

    def gpus(self, flags: dict[str, Any]) -> int:
        value = flags.get(self.gpus_flag, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"mock flag '{self.gpus_flag}' must be a whole number >= 0, got {value!r}")
        return value

    def flag_args(self, model: str, flags: Mapping[str, Any], weights: str = "real") -> list[str]:
        # The mock server has no GPUs to be told of; it loads no weights either.
        own = {self.gpus_flag, self.admission_flag, self.slots_flag, self.state_blocks_flag, *self.start_flags}
        return self.model_args(model) + render_flags({k: v for k, v in flags.items() if k not in own})

    def _launched(self, spec: EngineSpec, argv: list[str]) -> list[str]:
        """`argv` with farm's own guidellm started through `mock_launch.py`; a study's launcher,
        venv or image is left as it is (another interpreter, maybe another guidellm)."""
        if spec.launcher or spec.venv or spec.image or _GUIDELLM not in argv:
            return argv
        at = argv.index(_GUIDELLM)
        return argv[:at] + [sys.executable, _LAUNCH] + argv[at + 1:]

    def command(self, spec: EngineSpec, trial: Trial, *, port: int, host: str | None = None,
                gpu_ids: Sequence[str] | None = None) -> list[str]:
        argv = self._launched(spec, self._server_command(spec, trial, port=port, host=host, gpu_ids=gpu_ids))
        flags = trial.all_flags
        if "start-s" not in flags:
            return argv
        cold = float(flags["start-s"])
        warm = float(flags.get("warm-start-s", cold))
        marker = hashlib.sha1(str(self.compile_key(trial.model, flags, trial.weights)).encode()).hexdigest()[:16]
        # farm's node cache (actors/tokenizer.py: cache_dir), where real engines' compile caches go
        script = ('d="${FARM_MOCK_CACHE_DIR:-${FARM_CACHE_DIR:-$HOME/.cache/farm}/compile/mock}"; mkdir -p "$d"; '
                  f'm="$d/{marker}"; '
                  f'if [ -e "$m" ]; then echo "farm mock: compile cache warm"; sleep {warm}; '
                  f'else echo "farm mock: compile cache cold"; sleep {cold}; fi; '
                  'touch "$m"; exec "$@"')
        return ["sh", "-c", script, "mock-engine", *argv]

    def cache_env(self, root: PurePosixPath, flags: Mapping[str, Any] | None = None) -> dict[str, str]:
        # A mock with a simulated start (`start-s`) keeps a simulated compile cache (a marker per
        # compile group) where farm keeps the group's cache, so farm's sharing moves it like a real
        # engine's (actors/compile_cache.py); one without compiles nothing and keeps no cache.
        if not flags or "start-s" not in flags:
            return {}
        return {"FARM_MOCK_CACHE_DIR": str(PurePosixPath(root) / "mock")}

    def start_estimate_s(self, flags: Mapping[str, Any]) -> tuple[float, float]:
        if "start-s" not in flags:
            return super().start_estimate_s(flags)
        return float(flags["start-s"]), float(flags.get("warm-start-s", flags["start-s"]))

    def reported_startup(self, log_text: str) -> dict[str, Any]:
        m = re.search(r"^farm mock: compile cache (warm|cold)", log_text, re.M)
        return {"compile_cache_hit": m.group(1) == "warm"} if m else {}

    def warmup_command(self, spec: EngineSpec, model: str) -> list[str] | None:
        return None  # the mock server loads no weights

    def version_command(self, spec: EngineSpec) -> list[str] | None:
        return [self.launcher(spec)[0], "--version"]

    def own_version(self, spec: EngineSpec) -> str | None:
        # guidellm's mock-server runs from farm's own environment (whatever launcher wraps it): its
        # package's metadata is the version `guidellm --version` prints, without seconds of CPU a trial.
        try:
            return importlib.metadata.version("guidellm")
        except importlib.metadata.PackageNotFoundError:
            return None
