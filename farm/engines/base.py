"""The engine protocol: everything farm needs to know to launch, probe and judge one engine.

Each engine is one file in this package with one `Engine` subclass. Command building and log
classification are pure functions of their inputs, tested with parametrize tables; nothing
here starts a process or talks to a server (the effects layer does, using what this says).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar, Mapping, Sequence

# Failures and flag rendering live apart (farm/engines/failures.py, flags.py); their names stay importable
# from here, where the engines, the analysis, the actors and the tests take them.
from farm.engines.failures import Failure as Failure, FailurePattern as FailurePattern, first_exception
from farm.engines.flag_types import FlagType
from farm.engines.flags import (
    SECRET_MASK as SECRET_MASK, parse_cli_flags as parse_cli_flags, redact_args as redact_args, render_flag,
    render_flags,
)
from farm.engines.memory import MemoryReserve, MemorySettings
from farm.study.knobs import Renderer, render_with
from farm.study.spec import EngineSpec
from farm.study.trial import Trial, model_identity


# What each engine's `--help` printed, kept beside the code that renders its flags.
FACTS_DIR = Path(__file__).resolve().parent / "facts"


def _version_key(name: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"[.-]", name))


def _typed(value: Any) -> Any:
    """A command line's number as the number a study would write (`--max-num-seqs 256` -> 256)."""
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?(\d+\.\d*|\.\d+)([eE]-?\d+)?", value):
        return float(value)
    return value


def _dist_name(name: str) -> str:
    """A distribution's name as packaging compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


class Engine:
    """Base of every engine adapter. Subclasses set the class attributes and may override methods."""

    # Flags farm reads itself and never hands the server (the mock's start and admission flags).
    farm_flags: ClassVar[frozenset[str]] = frozenset()
    # The types and ranges of the flags farm renders or reads (farm/engines/flag_types.py): a
    # study's value of one is checked when the study is read, before anything starts.
    flag_types: ClassVar[Mapping[str, FlagType]] = {}

    name: ClassVar[str]
    default_launcher: ClassVar[list[str]]
    model_arg: ClassVar[str | None] = None  # None: the model is a positional argument after the launcher
    port_flag: ClassVar[str] = "port"
    host_flag: ClassVar[str] = "host"
    ready_path: ClassVar[str] = "/health"
    reset_cache_path: ClassVar[str | None] = None
    metrics_path: ClassVar[str | None] = None
    uses_gpus: ClassVar[bool] = True
    failure_patterns: ClassVar[list[FailurePattern]] = []
    secret_flag_names: ClassVar[frozenset[str]] = frozenset({"api-key", "hf-token", "token"})
    # Engine-neutral knob -> this engine's flags (farm/study/knobs.py); a knob missing here is one
    # this engine cannot express.
    knob_renderers: ClassVar[Mapping[str, Renderer]] = {}
    # The flag that tells the engine where model weights are downloaded (EngineSpec.download_dir).
    download_dir_flag: ClassVar[str | None] = None
    # The command inside the engine's container image (default: `default_launcher`).
    container_launcher: ClassVar[list[str] | None] = None
    # Estimated seconds from launch to ready, for cost estimates (farm.grid.grid_cost); not a timeout.
    start_overhead_s: ClassVar[float] = 30.0
    # The same with this configuration's compile cache warm on the node (None: no cache to warm).
    warm_start_overhead_s: ClassVar[float | None] = None
    # Flags that build the model's architecture with random weights instead of loading a
    # checkpoint (a study model with `weights: dummy`).
    dummy_weights_flags: ClassVar[Mapping[str, Any]] = {}
    # Whether the engine loads a checkpoint at all; one that does not (the mock server) serves a
    # `weights: dummy` model as it serves any other.
    loads_weights: ClassVar[bool] = True
    # Whether a first run after the engine's start is slower than the next (lazy initialisation, JIT
    # and CUDA-graph caches, allocator growth: 17 % on the lent H100): a profile then warms up by
    # default after every start (ProfileSpec.warmup_count); a profile's own warmup_requests applies to
    # every engine.
    warms_up: ClassVar[bool] = True
    # Flags that change what the engine compiles (torch.compile graphs, JIT and Triton kernels),
    # so that two configurations equal in these (and in model and weights) share a node's compile
    # cache: the second start is warm. None: the engine keeps no compile cache farm knows of.
    compile_flags: ClassVar[frozenset[str] | None] = None
    # Flags whose presence makes a configuration's throughput depend on what the model outputs
    # (speculative decoding: accepted draft tokens); meaningless on random weights.
    output_dependent_flags: ClassVar[frozenset[str]] = frozenset()
    # Flags that change what the model computes or answers: the precision of its weights,
    # activations, KV cache or state (quantization, dtype, kv-cache dtype), the decoding path
    # (speculative decoding), the model's code or config, its default sampling. A trial that sets
    # one is gated on quality against the trial without it (farm/analysis/quality_gate.py).
    # Kernel and scheduling choices (attention backend, CUDA graphs, batch sizes, prefix caching)
    # are left out: they move results only at the rounding level that the batch's own composition
    # moves them too, and a gate on every one of them would gate every trial.
    numerics_flags: ClassVar[frozenset[str]] = frozenset()
    # Name prefixes of further such flags (SGLang's `speculative-*` family).
    numerics_flag_prefixes: ClassVar[tuple[str, ...]] = ()
    # The value a numerics flag has when it is not given (`kv-cache-dtype: auto`): set to it, it
    # changes nothing. false and null are never a change (the flag is not rendered at all).
    numerics_defaults: ClassVar[Mapping[str, Any]] = {}

    # How this engine spends a GPU's memory (farm/engines/memory.py); None: no memory-fit model.
    memory_reserve: ClassVar["MemoryReserve | None"] = None

    def compile_key(self, model: str, flags: Mapping[str, Any], weights: str = "real") -> str | None:
        """What a start of this configuration compiles: equal keys share a node's compile cache
        (farm.analysis.schedule keeps them on one node, one after another); None: no cache."""
        if self.compile_flags is None:
            return None
        graph = {k: v for k, v in flags.items() if k in self.compile_flags}
        return json.dumps([self.name, model, weights, graph], sort_keys=True, default=str)

    # Changes when the folders `cache_env` declares change: a pack made under another layout lacks
    # the new folders and would start partly cold while its record said warm, so its key differs
    # (actors/compile_cache.py: group_key). None: the layout farm started with.
    compile_cache_layout: ClassVar[str | None] = None

    def compile_cache_model(self, model: str) -> str:
        """The model as the engine's compile cache knows it, in a pack's key (actors/compile_cache.py):
        by name where the compiled code does not depend on where the model sits."""
        return model_identity(model)

    def start_estimate_s(self, flags: Mapping[str, Any]) -> tuple[float, float]:
        """Estimated seconds from launch to ready: (cold compile cache, warm)."""
        warm = self.warm_start_overhead_s
        return self.start_overhead_s, self.start_overhead_s if warm is None else warm

    # -- resources -----------------------------------------------------------------------
    def gpus(self, flags: dict[str, Any]) -> int:
        """GPUs one trial needs, all on one node."""
        return 0

    def check_flags(self, flags: Mapping[str, Any]) -> None:
        """Raise ValueError for a flag value farm itself reads and cannot use (the grid turns it into
        a one-line error naming the block); flags only the engine reads are the engine's to judge."""

    def memory_settings(self, flags: Mapping[str, Any], model_quantization: str | None) -> "MemorySettings | None":
        """What of the trial's flags decides its memory; None where the engine has no memory-fit model."""
        return None

    def default_memory_fraction(self, flags: Mapping[str, Any], gpu_bytes: int,
                                config: Mapping[str, Any]) -> float | None:
        """The fraction the engine budgets when the flags name none, where the engine derives it
        from the GPU and the model (config.json); None: `memory_reserve`'s fixed default."""
        return None

    # -- knobs ---------------------------------------------------------------------------
    def render_knobs(self, knobs: Mapping[str, Any], taken: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Engine-neutral knobs -> this engine's flags; `farm.knobs.KnobError` where it cannot
        (or where a knob would set a flag of `taken`: flag -> where it is already set)."""
        return render_with(self.name, self.knob_renderers, knobs, taken)

    # -- command -------------------------------------------------------------------------
    def launcher(self, spec: EngineSpec, *, gpu_ids: Sequence[str] | None = None,
                 env_names: Sequence[str] = (), container_name: str | None = None) -> list[str]:
        """The argv before the engine's own arguments: a plain command, a venv's executable, or
        `docker run ... IMAGE` with the trial's GPUs (`gpu_ids`; all GPUs when not given)."""
        if spec.image:
            return self.container_prefix(spec, gpu_ids=gpu_ids, env_names=env_names, name=container_name,
                                         entry=self.container_launcher or self.default_launcher)
        if spec.venv:
            return self.venv_launcher(spec.venv)
        return list(spec.launcher or self.default_launcher)

    def venv_launcher(self, venv: str) -> list[str]:
        """The default launcher with its executable taken from `venv`/bin."""
        head, *rest = self.default_launcher
        return [str(PurePosixPath(venv) / "bin" / PurePosixPath(head).name), *rest]

    def container_prefix(self, spec: EngineSpec, *, entry: Sequence[str], gpu_ids: Sequence[str] | None = None,
                         env_names: Sequence[str] = (), name: str | None = None, gpus: bool = True) -> list[str]:
        """`docker run` (or podman) of `spec.image` running `entry`.

        Host network (the engine binds the host's port directly), host IPC (shared memory for
        tensor-parallel workers), the download dir mounted at the same path, environment passed
        by name only (`-e NAME`: values, secrets included, never appear in the argv).
        """
        runtime = spec.container_runtime
        argv = [runtime, "run", "--rm", "--init", "--network=host", "--ipc=host"]
        if name:
            argv.append(f"--name={name}")
        if gpus:
            if runtime == "podman":  # CDI device names
                argv += [f"--device=nvidia.com/gpu={g}" for g in (gpu_ids or ["all"])]
            else:  # the inner quotes keep docker from splitting the device list at its commas
                argv.append(f'--gpus="device={",".join(gpu_ids)}"' if gpu_ids else "--gpus=all")
        if spec.download_dir:
            argv.append(f"--volume={spec.download_dir}:{spec.download_dir}")
        for env_name in dict.fromkeys([*env_names, *spec.secret_env]):
            if env_name != "CUDA_VISIBLE_DEVICES":  # the container sees only its own GPUs, numbered from 0
                argv += ["-e", env_name]
        argv += list(spec.container_args)
        head, *rest = entry
        return argv + [f"--entrypoint={head}", spec.image, *rest]

    def container_name(self, trial: Trial, port: int) -> str:
        return f"farm-{trial.id}-{port}"

    def model_args(self, model: str) -> list[str]:
        return [f"--{self.model_arg}={model}"] if self.model_arg else [model]

    def serve_args(self, trial: Trial) -> list[str]:
        return self.flag_args(trial.model, trial.all_flags, trial.weights)

    def flag_args(self, model: str, flags: Mapping[str, Any], weights: str = "real") -> list[str]:
        """The engine's own arguments to serve `model` with `flags` (every flag, required ones included)."""
        return self.model_args(model) + render_flags(self.weights_flags(flags, weights)) + render_flags(flags)

    @property
    def serves_dummy_weights(self) -> bool:
        """Whether a `weights: dummy` model can run on this engine (the grid refuses it otherwise)."""
        return bool(self.dummy_weights_flags) or not self.loads_weights

    def weights_flags(self, flags: Mapping[str, Any], weights: str) -> dict[str, Any]:
        """The dummy-weights flags a `weights: dummy` trial gets (unless its flags already set them)."""
        if weights != "dummy":
            return {}
        return {k: v for k, v in self.dummy_weights_flags.items() if k not in flags}

    def changes_numerics(self, flag: str) -> bool:
        """Whether `flag` (a name, `--` or not) is one that changes what the model computes."""
        name = flag.lstrip("-")
        return name in self.numerics_flags or name.startswith(self.numerics_flag_prefixes)

    def numerics(self, flags: Mapping[str, Any]) -> dict[str, Any]:
        """The flags of `flags` that change numerics and are set away from the engine's default."""
        out: dict[str, Any] = {}
        for name, value in flags.items():
            key = name.lstrip("-")
            if not self.changes_numerics(key) or value is None or value is False:
                continue
            if key in self.numerics_defaults and str(value).lower() == str(self.numerics_defaults[key]).lower():
                continue
            out[name] = value
        return out

    def output_dependent(self, flags: Mapping[str, Any] | Sequence[str]) -> list[str]:
        """The flags (of a mapping, or of `--name=value` strings) whose effect depends on the model's output."""
        names = [f.lstrip("-").partition("=")[0] for f in flags] if not isinstance(flags, Mapping) else list(flags)
        return [n for n in names if n in self.output_dependent_flags]

    def command(self, spec: EngineSpec, trial: Trial, *, port: int, host: str | None = None,
                gpu_ids: Sequence[str] | None = None) -> list[str]:
        """The exact argv that starts the server for `trial` on `host:port`.

        `gpu_ids` (the node's ids of the trial's GPUs) matter only to container launchers.
        """
        launcher = self.launcher(spec, gpu_ids=gpu_ids, env_names=list(self.env(spec, trial)),
                                 container_name=self.container_name(trial, port))
        download: list[str] = []
        if spec.download_dir and self.download_dir_flag and self.download_dir_flag not in trial.all_flags:
            download = render_flag(self.download_dir_flag, spec.download_dir)
        return (
            launcher
            + self.serve_args(trial)
            + download
            + render_flag(self.host_flag, host or spec.host)
            + render_flag(self.port_flag, port)
        )

    def cleanup_command(self, spec: EngineSpec, trial: Trial, *, port: int) -> list[str] | None:
        """What removes the engine if its process group could not be stopped cleanly: killing
        `docker run` does not stop the container, removing it by name does."""
        if spec.image:
            return [spec.container_runtime, "rm", "-f", self.container_name(trial, port)]
        return None

    def python(self, spec: EngineSpec) -> list[str]:
        """The argv prefix of the Python interpreter the engine runs on (for probes and warm-up)."""
        if spec.image:
            return self.container_prefix(spec, entry=["python3"], gpus=False)
        if spec.venv:
            return [str(PurePosixPath(spec.venv) / "bin" / "python")]
        head = (spec.launcher or self.default_launcher)[0]
        if PurePosixPath(head).name.startswith("python"):
            return [head]
        if "/" in head:  # e.g. /opt/venvs/engine/bin/serve-command -> that venv's python
            return [str(PurePosixPath(head).parent / "python")]
        return ["python3"]

    def warmup_command(self, spec: EngineSpec, model: str) -> list[str] | None:
        """Download `model` into the engine's download dir (or the HF cache) before the first trial
        on a node, so no trial times a download. None for a local path."""
        if model.startswith(("/", "./", "../", "~")):
            return None
        code = ("import sys; from huggingface_hub import snapshot_download; "
                "print(snapshot_download(repo_id=sys.argv[1], cache_dir=sys.argv[2] or None))")
        return self.python(spec) + ["-c", code, model, spec.download_dir or ""]

    # -- the inverse: a serve command a user runs today -----------------------------------
    def launchers(self, spec: EngineSpec) -> list[list[str]]:
        """The command heads this engine is started with: the study's, the default, the container's."""
        out = [list(spec.launcher)] if spec.launcher else []
        return out + [list(self.default_launcher)] + ([list(self.container_launcher)] if self.container_launcher else [])

    def split_command(self, argv: Sequence[str], spec: EngineSpec) -> list[str] | None:
        """The engine's own arguments of `argv` when it is this engine's serve command (its head one
        of `launchers`, an executable compared by its name), else None."""
        for head in self.launchers(spec):
            n = len(head)
            if len(argv) >= n and PurePosixPath(argv[0]).name == PurePosixPath(head[0]).name and \
                    list(argv[1:n]) == head[1:]:
                return list(argv[n:])
        return None

    def facts_file(self) -> Path | None:
        """The engine's own `--help` as farm keeps it (farm/engines/facts/<engine>-<version>-help.txt,
        the newest version's), or None where farm has none yet."""
        found = sorted(FACTS_DIR.glob(f"{self.name}-*-help.txt"), key=lambda p: _version_key(p.name))
        return found[-1] if found else None

    def known_flags(self) -> frozenset[str] | None:
        """Every flag the engine takes, read from its `--help` (None: farm keeps no list)."""
        path = self.facts_file()
        if path is None:
            return None
        names = set(re.findall(r"(?<![\w-])--([a-z0-9][a-z0-9._-]*)", path.read_text()))
        return frozenset(names | {n.removeprefix("no-") for n in names if n.startswith("no-")})

    def unknown_flags(self, flags: Mapping[str, Any]) -> list[str]:
        """The flags of `flags` that the engine does not take (none when farm keeps no flag list)."""
        known = self.known_flags()
        if known is None:
            return []
        return [f for f in flags if f not in known and f not in self.farm_flags]

    def flags_source(self) -> str:
        path = self.facts_file()
        return f"its --help: farm/engines/facts/{path.name}" if path else f"farm keeps no flag list of {self.name}"

    def parse_command(self, argv: Sequence[str], spec: EngineSpec) -> tuple[str, dict[str, Any]] | None:
        """(model, flags) of this engine's serve command `argv` (the inverse of `serve_command_of`),
        None when it is not one; a `ValueError` names what cannot be read. Host, port and the
        dummy-weights flags are left out: farm sets them."""
        args = self.split_command(argv, spec)
        if args is None:
            return None
        model, flags, i = None, {}, 0
        if self.model_arg is None and args and not args[0].startswith("-"):
            model, i = args[0], 1
        while i < len(args):
            arg = args[i]
            if not arg.startswith("--") or len(arg) < 3:
                raise ValueError(f"'{arg}' is not a flag (expected --name or --name=value)")
            name, sep, value = arg[2:].partition("=")
            if not sep and i + 1 < len(args) and not args[i + 1].startswith("--"):
                value, sep, i = args[i + 1], "=", i + 1
            i += 1
            if name in flags:
                raise ValueError(f"--{name} is given twice")
            flags[name] = _typed(parse_cli_flags([f"--{name}={value}"])[name]) if sep else True
        if self.model_arg is not None:
            model = flags.pop(self.model_arg, None)
        if not isinstance(model, str) or not model:
            raise ValueError("no model in the command" + (f" (--{self.model_arg})" if self.model_arg else ""))
        for name in (self.host_flag, self.port_flag):
            flags.pop(name, None)
        for name, value in self.dummy_weights_flags.items():
            if flags.get(name) == value:
                flags.pop(name)
        return model, flags

    def serve_command(self, spec: EngineSpec, trial: Trial) -> str:
        """What a user pastes to serve this configuration (no host, port or secrets)."""
        return self.serve_command_of(spec, trial.model, trial.all_flags, trial.weights)

    def serve_command_of(self, spec: EngineSpec, model: str, flags: Mapping[str, Any], weights: str = "real") -> str:
        """`serve_command` for a configuration known by its model and flags (a run record)."""
        return shlex.join(redact_args(self.launcher(spec) + self.flag_args(model, flags, weights), self.secret_flags(spec)))

    def secret_flags(self, spec: EngineSpec) -> set[str]:
        return set(self.secret_flag_names) | {f.lstrip("-") for f in spec.secret_flags}

    # -- environment ---------------------------------------------------------------------
    def env(self, spec: EngineSpec, trial: Trial) -> dict[str, str]:
        """Variables this engine needs on top of the node's environment."""
        return dict(spec.env)

    def cache_env(self, root: PurePosixPath, flags: Mapping[str, Any] | None = None) -> dict[str, str]:
        """Variables that put the engine's compile caches (torch.compile, JIT kernels) under `root`,
        a per-node directory that outlives trials: a second start of a configuration skips compiling."""
        return {}

    # -- start-up ------------------------------------------------------------------------
    def reported_startup(self, log_text: str) -> dict[str, Any]:
        """The phases of the engine's start (seconds, memory) and whether its compile cache was warm,
        read from its log; {} where it does not say."""
        return {}

    # -- probing -------------------------------------------------------------------------
    def version_command(self, spec: EngineSpec) -> list[str] | None:
        return None

    # The engine's Python distribution, whose metadata in a study's `venv` holds its version.
    package: ClassVar[str | None] = None

    def own_version(self, spec: EngineSpec) -> str | None:
        """The engine's version read from package metadata on this node, no process run (an
        engine's `--version` imports it: seconds of CPU beside its start): its distribution in the
        study's `venv`; None where that cannot say (a launcher or an image): a trial runs
        `version_command` instead."""
        if not (spec.venv and self.package):
            return None
        import importlib.metadata  # only on a node, for a trial

        wanted = _dist_name(self.package)
        for site in sorted(Path(spec.venv).glob("lib/python*/site-packages")):
            for dist in importlib.metadata.distributions(path=[str(site)]):
                if _dist_name(dist.metadata.get("Name") or "") == wanted:
                    return dist.version
        return None

    def parse_version(self, output: str) -> str | None:
        match = re.search(r"\d+\.\d+(?:\.\d+)?(?:[\w.+-]*)", output)
        return match.group(0) if match else None

    def reported_capacity(self, log_text: str) -> dict[str, Any]:
        """What the engine says it got (KV-cache tokens, max sequences...), read from its log."""
        return {}

    # Prometheus counters (name in the engine's /metrics -> farm's name) read before and after
    # every benchmark run; their deltas are the engine's own account of the run.
    counters: ClassVar[Mapping[str, str]] = {}

    def parse_counters(self, metrics_text: str) -> dict[str, float]:
        """The engine's counters of interest from Prometheus text, summed over label sets
        (one per engine core with data parallelism)."""
        out: dict[str, float] = {}
        for line in metrics_text.splitlines():
            if not line or line.startswith("#"):
                continue
            name, _, rest = line.partition("{") if "{" in line.split(" ", 1)[0] else line.partition(" ")
            farm_name = self.counters.get(name.strip())
            if farm_name is None:
                continue
            try:
                value = float(line.rsplit(" ", 1)[-1])
            except ValueError:
                continue
            out[farm_name] = out.get(farm_name, 0.0) + value
        return out

    # -- failures ------------------------------------------------------------------------
    def classify(self, log_text: str) -> Failure | None:
        """The first known failure pattern found in the log, in the table's order of priority."""
        for fp in self.failure_patterns:
            match = fp.search(log_text)
            if match:
                line_start = log_text.rfind("\n", 0, match.start()) + 1
                line_end = log_text.find("\n", match.end())
                line = log_text[line_start: line_end if line_end >= 0 else None].strip()
                if fp.wrapper:
                    line = first_exception(log_text[:line_start]) or line
                return Failure(fp.status, fp.reason, line[:500])
        return None

    def named_limits(self, log_text: str) -> dict[str, int]:
        """Limits the engine named when it refused to start (`running_requests_limit`: the most
        requests at once it would have taken; `state_blocks`: its hybrid model's state blocks), from
        its log; {} where it named none. A search repairs a command that cannot start with them."""
        return {}

    def default_running_requests(self, flags: Mapping[str, Any], gpu_bytes: int) -> int | None:
        """Requests at once the engine allows when the flags name no limit, on a GPU of `gpu_bytes`;
        None where farm does not know the engine's default."""
        return None


