"""SGLang: `python -m sglang.launch_server --model-path MODEL --flag=value ...`.

Flags, log lines and defaults checked against SGLang 0.4.3 to 0.5.x (the seed ran 0.5.9) and the
source of 0.5.16 (the H200 bundle's); each failure pattern's real log excerpt and its source are in
tests/fixtures/engine-logs/ (SOURCES.md), the 0.5.16 formats in
bench/h200/engine-logs/ (real, from the H200) and
tests/fixtures/engine-logs/sglang-0.5.16-h200-constructed/README.md (constructed failure lines).

Knobs in SGLang's terms (KNOB_RENDERERS, farm/engines/sglang_knobs.py), and what is particular about them:
- prefix_caching: the radix cache is on by default and has no "on" flag; off is
  --disable-radix-cache.
- gpu_memory_fraction: --mem-fraction-static budgets weights and the KV pool only; activations
  and CUDA graphs live in the rest.
- max_batched_tokens: --chunked-prefill-size, which also splits every longer prompt into chunks.
- cuda_graph N: --cuda-graph-max-bs, in requests.
- kv_offload N: hierarchical cache, --hicache-size N in whole GB per rank; it extends the radix
  cache, so it needs prefix caching on.
- data_parallel without expert_parallel: independent replicas behind SGLang's router; with it,
  DP attention inside one tensor-parallel group whose experts are spread over every GPU.
- speculative mtp: NEXTN, drafting num_tokens tokens as a chain (top-k 1).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, ClassVar, Mapping

from farm.engines.base import Engine, FailurePattern
from farm.engines.flag_types import BOOLEAN, FRACTION, POSITIVE_INT, WHOLE, FlagType
from farm.engines.memory import MemoryReserve, MemorySettings
from farm.engines.moe_config import moe_kernel_config
from farm.engines._logs import _as_int, _first, _int_flag, _int_list, per_rank_sum
from farm.engines.sglang_knobs import KNOB_RENDERERS  # the knobs' flags, in a module of their own
from farm.study.knobs import Renderer
from farm.study.spec import EngineSpec

# ---------------------------------------------------------------------------------------
# Memory: how SGLang 0.5.16 sizes its pools (read in its source, checked against the H200's logs)

MIB = 1024 ** 2
# server_args.py `_handle_gpu_memory_settings`: by the GPU's memory (MiB, nvidia-smi's), the default
# chunked-prefill size and decode CUDA-graph batch limit (the second for tp >= 4). H20 and H200 fall
# in the band below 160 GiB: 8192 tokens, 256 requests.
_GPU_DEFAULTS = ((20 * 1024, 2048, 8, 8), (35 * 1024, 2048, 24, 80), (60 * 1024, 4096, 32, 160),
                 (160 * 1024, 8192, 256, 512))
_LARGE_GPU_DEFAULTS = (16384, 512, 512)


def _prefill_graph_sizes(most: int) -> int:
    """How many token counts SGLang captures prefill CUDA graphs for, up to `most`
    (server_args.py `_generate_prefill_cuda_graph_batch_sizes`: 58 up to 8192)."""
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, most + 1, 512)]
    return sum(1 for n in sizes if n <= most)


def _vision_factor(config: Mapping[str, Any]) -> float:
    """server_args.py `adjust_mem_fraction_for_vlm`: a multimodal model's default fraction shrinks by
    5 %, and by a tenth of how much its vision tower outgrows ViT-L (24 layers x 1024 wide). SGLang
    reads the tower's `num_hidden_layers`; Qwen3.5's config names it `depth`, so SGLang takes 24."""
    vision = config.get("vision_config")
    if not isinstance(vision, Mapping):
        return 1.0
    layers, width = int(vision.get("num_hidden_layers") or 24), int(vision.get("hidden_size") or 1024)
    growth = layers * width ** 2 / (24 * 1024 ** 2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (growth - 1.0)))


def _state_slots_per_request(flags: Mapping[str, Any]) -> int:
    """kv_cache_configurator.py `_calculate_mamba_ratio`: with the radix cache a running request holds
    3 state slots, plus 2 ping-pong buffers of its extra-buffer strategy under the overlap scheduler
    (1 lazily or without it); without the radix cache, 1. On the H200: 398 slots ran 79 requests."""
    if flags.get("disable-radix-cache"):
        return 1
    strategy = str(flags.get("mamba-radix-cache-strategy") or "extra_buffer")
    if strategy not in ("extra_buffer", "extra_buffer_lazy"):
        return 3
    if flags.get("disable-overlap-schedule"):
        return 4
    return 4 if strategy == "extra_buffer_lazy" else 5


# ---------------------------------------------------------------------------------------


# The flags farm reads (GPUs, memory fit, capacity) or renders from a knob, typed (farm/engines/flag_types.py).
FLAG_TYPES: dict[str, FlagType] = {
    **dict.fromkeys(("tp-size", "dp-size", "pp-size", "ep-size", "tensor-parallel-size", "data-parallel-size",
                     "pipeline-parallel-size", "tp", "dp", "pp", "max-running-requests", "context-length",
                     "max-mamba-cache-size", "cuda-graph-max-bs", "cuda-graph-max-bs-decode", "max-prefill-tokens",
                     "hicache-size", "speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens"),
                    POSITIVE_INT),
    "chunked-prefill-size": WHOLE,  # -1 turns chunked prefill off
    "mem-fraction-static": FRACTION,
    **dict.fromkeys(("enable-dp-attention", "disable-radix-cache", "disable-cuda-graph", "disable-overlap-schedule",
                     "disable-prefill-cuda-graph", "enable-hierarchical-cache", "enable-priority-scheduling",
                     "language-only"), BOOLEAN),
}


class SGLangEngine(Engine):
    name = "sglang"
    package = "sglang"
    flag_types = FLAG_TYPES
    default_launcher: ClassVar[list[str]] = ["python", "-m", "sglang.launch_server"]
    model_arg = "model-path"
    # /health_generate runs one real generation: ready means the model serves, not just that the
    # HTTP server is up.
    ready_path = "/health_generate"
    reset_cache_path = "/flush_cache"
    metrics_path = "/metrics"
    knob_renderers: ClassVar[Mapping[str, Renderer]] = KNOB_RENDERERS
    download_dir_flag = "download-dir"
    container_launcher: ClassVar[list[str]] = ["python3", "-m", "sglang.launch_server"]
    # Launch to ready on an H200 for a 35B MoE, weights on local disk: loading, CUDA-graph capture
    # and SGLang's own warm-up request. An estimate for cost planning, not measured.
    start_overhead_s = 240.0
    warm_start_overhead_s = 80.0  # 78-83 s with its JIT and Triton caches kept on the H200 (161 s cold)
    dummy_weights_flags: ClassVar[Mapping[str, Any]] = {"load-format": "dummy"}
    output_dependent_flags: ClassVar[frozenset[str]] = frozenset({"speculative-algorithm"})
    # What changes the numbers the model computes or the answers it gives (SGLang 0.5.16's --help,
    # farm/engines/facts/): precision of weights, activations, KV cache and Mamba state (including
    # the ModelOpt and torchao paths, an FP32 LM head, TF32 matmuls, batch-invariant kernels); the
    # whole speculative family (`speculative-*`: the draft model, its steps, and the acceptance
    # thresholds that make it lossy on purpose); the model's code and config; and the defaults a
    # request is sampled with.
    numerics_flags: ClassVar[frozenset[str]] = frozenset({
        "dtype", "quantization", "quantization-param-path", "kv-cache-dtype", "modelopt-quant", "quantize-and-serve",
        "torchao-config", "rl-quant-profile", "flashinfer-mxfp4-moe-precision", "mamba-ssm-dtype",
        "enable-mamba-cache-stochastic-rounding", "enable-fp32-lm-head", "enable-tf32-matmul",
        "triton-attention-reduce-in-fp32", "enable-deterministic-inference",
        "model-impl", "revision", "json-model-override-args", "tokenizer-path", "tokenizer-mode",
        "sampling-defaults", "preferred-sampling-params"})
    numerics_flag_prefixes: ClassVar[tuple[str, ...]] = ("speculative-",)
    numerics_defaults: ClassVar[Mapping[str, Any]] = {
        "dtype": "auto", "kv-cache-dtype": "auto", "model-impl": "auto", "tokenizer-mode": "auto",
        "sampling-defaults": "model"}
    # What its JIT, Triton and DeepGEMM caches (78-83 s warm against 161 s cold on the H200) depend
    # on: kernels are built per dtype, quantization, parallel layout, prefill chunk and graph sizes.
    compile_flags: ClassVar[frozenset[str] | None] = frozenset({
        "dtype", "quantization", "kv-cache-dtype", "chunked-prefill-size", "context-length", "tp-size", "dp-size",
        "ep-size", "enable-dp-attention", "cuda-graph-max-bs", "disable-cuda-graph", "speculative-algorithm",
        "speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens",
        "speculative-draft-model-path", "attention-backend", "linear-attn-backend", "mamba-backend"})

    failure_patterns: ClassVar[list[FailurePattern]] = [
        FailurePattern(r"error: (unrecognized arguments|argument [^:\n]+: invalid (choice|\w+ value)|"
                       r"the following arguments are required)", "invalid_flags",
                       "SGLang rejected its arguments"),
        FailurePattern(r"(\w+Config only supports \w+ \w+ quantization|Unknown quantization method|"
                       r"Invalid quantization method|The quantization method \S+ is not supported for the current GPU|"
                       r"[Qq]uantization method specified in the model config \(\S+\) does not match)",
                       "invalid_flags", "unsupported quantization for this model or GPU"),
        FailurePattern(r"Not enough memory\. Please try to increase --mem-fraction-static", "oom",
                       "not enough GPU memory left for the KV cache"),
        # 0.5.16 mem_cache/kv_cache_configurator.py: a hybrid model's state slots (one per running
        # request) left no room for a single request.
        FailurePattern(r"Hybrid \(mamba/linear-attention\) state cache is too small to serve any requests", "oom",
                       "no room for the linear-attention state of one request"),
        FailurePattern(r"(torch\.OutOfMemoryError|CUDA out of memory|CUDA error: out of memory)", "oom",
                       "CUDA out of memory"),
        # 0.5.16 model_executor/runner/decode_cuda_graph_runner.py; its advice (CUDA_GRAPH_CAPTURE_FAILED_MSG)
        # is a smaller --mem-fraction-static or --cuda-graph-max-bs-decode. An out-of-memory cause above wins.
        FailurePattern(r"Capture (?:cuda graph|prefill CUDA graph) failed: [^\n]*", "engine_failed_to_start",
                       "CUDA graph capture failed"),
        # transformers' message when the model directory lacks a file SGLang loads at start (seen on
        # the H200: a vision-language model's preprocessor_config.json); the model, not the flags.
        FailurePattern(r"OSError: Can't load (?:image processor|video processor|processor|tokenizer|the configuration) "
                       r"for '[^'\n]*'", "engine_failed_to_start",
                       "the model directory lacks a file the engine loads"),
        FailurePattern(r"([Aa]ddress already in use|EADDRINUSE)", "port_in_use", "a port was already taken"),
        # A scheduler that dies while it is being built never served; one that dies in its event
        # loop crashed under load.
        FailurePattern(r"Scheduler hit an exception: Traceback[^\n]*\n(?:[^\n]*\n){0,3}?\s*scheduler = Scheduler\(",
                       "engine_failed_to_start", "the scheduler failed to initialize"),
        FailurePattern(r"(Scheduler hit an exception|TpModelWorker hit an exception|"
                       r"DataParallelController hit an exception|Received sigquit from a child process)",
                       "engine_crashed", "an SGLang scheduler process died"),
    ]

    # SGLang 0.5.16 on one H200 (bench/h200/engine-logs/sglang-0.5.16-*, Qwen3.5-35B-A3B's shape, dummy
    # weights). From its source (kv_cache_configurator.py `_profile_available_bytes`,
    # `_handle_max_mamba_cache`, `resolve_max_num_reqs`): the pools get mem_fraction_static of the
    # memory free before the weights load, less the weights; a hybrid model's mamba-state slots take
    # mamba_full_memory_ratio / (1 + it) = 0.9 / 1.9 of that (unless the flags fix the count); the rest
    # is KV cache; requests at once default to 512 per context length of KV tokens, 2048 to 4096.
    # Measured there (all four starts print the same): 139.07 GiB free before the weights load of the
    # 140.40 (143,771 MiB), so 1.331 GiB goes first; the load took 65.67 GiB in bf16, 1.110 more than
    # farm's count of the language model (SGLang also builds the vision tower), and 34.66 GiB in FP8,
    # 1.433 more.
    memory_reserve = MemoryReserve(
        budget="static", default_gpu_memory_utilization=0.88, default_batched_tokens=8192, reserve_base_gib=0.0,
        reserve_per_batched_token_bytes=0.0, startup_gib=1.331, load_extra_gib={"bf16": 1.110, "fp8": 1.433},
        state_pool_share=0.9 / 1.9, running_requests_per_context=512, running_requests_bounds=(2048, 4096),
        calibration="SGLang 0.5.16 on one H200: its pool sizing read in its source; the memory free at start and the "
                    "weights' load from four starts of Qwen3.5-35B-A3B's shape (bf16 default, bf16 with "
                    "--max-running-requests 512 with and without the radix cache, fp8), bench/h200/engine-logs/")

    def memory_settings(self, flags: Mapping[str, Any], model_quantization: str | None) -> MemorySettings | None:
        if flags.get("speculative-algorithm"):
            return None  # the draft model's weights, KV pool and intermediate states: not modelled
        quant = flags.get("quantization") or model_quantization
        tp = _int_flag(flags, "tp-size", "tensor-parallel-size", "tp")
        dp = _int_flag(flags, "dp-size", "data-parallel-size", "dp")
        # With DP attention the tp-size GPUs hold dp attention groups of tp / dp GPUs each, and
        # the experts span them all; without it, dp replicas of tp GPUs each.
        dp_attention = bool(flags.get("enable-dp-attention")) and dp > 1
        attention_dp = dp if dp_attention else 1
        asked = flags.get("max-running-requests")
        per_worker = int(asked) // attention_dp if asked else None
        slots = None
        if flags.get("max-mamba-cache-size"):
            slots = int(flags["max-mamba-cache-size"]) // attention_dp
        elif flags.get("disable-radix-cache") and per_worker is not None:
            slots = per_worker  # sized for the requests asked, not from memory
        return MemorySettings(
            weights_dtype="fp8" if quant and "fp8" in str(quant) else "bf16",
            kv_dtype="fp8" if "fp8" in str(flags.get("kv-cache-dtype") or "") else "auto",
            tensor_parallel=max(tp // attention_dp, 1), data_parallel=dp, expert_parallel=dp_attention,
            gpu_memory_utilization=float(flags["mem-fraction-static"]) if flags.get("mem-fraction-static") else None,
            max_batched_tokens=int(flags["chunked-prefill-size"]) if flags.get("chunked-prefill-size") else None,
            max_model_len=int(flags["context-length"]) if flags.get("context-length") else None,
            prefix_caching=not flags.get("disable-radix-cache"), max_running_requests=per_worker, state_slots=slots,
            state_slots_per_request=_state_slots_per_request(flags))

    def default_memory_fraction(self, flags: Mapping[str, Any], gpu_bytes: int, config: Mapping[str, Any]) -> float:
        """server_args.py `_handle_gpu_memory_settings`: mem_fraction_static = 1 - reserved / GPU memory,
        to 3 decimals, reserved (MiB) = 512 + 1.5 per token of max(chunked prefill, 2048) + 128 per GPU
        of tp x pp + 2 per decode CUDA-graph request (+ 3 per request and DP rank with DP attention)
        + 8 per prefill CUDA-graph size, at least 10 GiB on GPUs over 60 GiB; then the vision-tower
        factor. On the H200: 13,904 MiB, 0.903, x 0.9248 = 0.835063 (the logs' mem_fraction_static)."""
        gpu_mib = gpu_bytes / MIB
        tp = _int_flag(flags, "tp-size", "tensor-parallel-size", "tp")
        pp = _int_flag(flags, "pp-size", "pipeline-parallel-size", "pp")
        dp = _int_flag(flags, "dp-size", "data-parallel-size", "dp")
        _, chunk, graph_bs, graph_bs_tp4 = next((d for d in _GPU_DEFAULTS if gpu_mib < d[0]),
                                                (None, *_LARGE_GPU_DEFAULTS))
        chunk = int(flags.get("chunked-prefill-size") or chunk)
        graph_bs = int(flags.get("cuda-graph-max-bs") or flags.get("cuda-graph-max-bs-decode")
                       or (graph_bs if tp < 4 else graph_bs_tp4))
        off = bool(flags.get("disable-cuda-graph"))
        decode_graphs = not off and flags.get("cuda-graph-backend-decode") != "disabled"
        prefill_graphs = not (off or flags.get("disable-prefill-cuda-graph")
                              or flags.get("cuda-graph-backend-prefill") == "disabled")
        activation = max(chunk if chunk > 0 else int(flags.get("max-prefill-tokens") or 16384), 2048)
        reserved = 512 + 1.5 * activation + tp * pp / 8 * 1024
        if decode_graphs:
            reserved += 2 * graph_bs
        if flags.get("enable-dp-attention"):
            reserved += graph_bs * dp * 3 + (graph_bs * dp * 1.5 if graph_bs > 300 else 0)
        if prefill_graphs and chunk > 0:
            context = int(flags.get("context-length") or chunk)
            reserved += 8 * _prefill_graph_sizes(min(chunk, context))
        if gpu_mib > 60 * 1024:
            reserved = max(reserved, 10 * 1024)
        fraction = round((gpu_mib - reserved) / gpu_mib, 3)
        return fraction if flags.get("language-only") else fraction * _vision_factor(config)

    def gpus(self, flags: dict[str, Any]) -> int:
        tp = _int_flag(flags, "tp-size", "tensor-parallel-size", "tp")
        pp = _int_flag(flags, "pp-size", "pipeline-parallel-size", "pp")
        dp = _int_flag(flags, "dp-size", "data-parallel-size", "dp")
        # With DP attention the data-parallel groups live inside the tensor-parallel GPUs.
        return tp * pp if flags.get("enable-dp-attention") else tp * pp * dp

    def version_command(self, spec: EngineSpec) -> list[str] | None:
        return self.python(spec) + ["-c", "import sglang; print(sglang.__version__)"]

    def cache_env(self, root: PurePosixPath, flags: Mapping[str, Any] | None = None) -> dict[str, str]:
        # What SGLang 0.5.16 compiles at start and keeps (its environ.py, tvm_ffi/cpp/extension.py):
        # its own JIT kernels (tvm-ffi builds), the Triton kernels of the linear-attention and mamba
        # backends, DeepGEMM's FP8 kernels, and its own cache (FA3 lock files). On the H200 a start
        # took 205 s cold and 114 s with these kept. And inductor's: SGLang wraps small functions in
        # torch.compile(dynamic=True) (mrope's apply_rotary_emb, MoE top-k, the fused MoE's sum
        # reduce), compiled again for the shapes of every prefill CUDA graph; their cache defaults to
        # /tmp/torchinductor_$USER, outside every pack. Without it, the FP8-KV group started from its
        # carried pack in 140 s (prefill graphs 54 s) against 100 s warm on the node that compiled it
        # (prefill graphs 20 s) and 215 s cold (bench/h200/README.md, 2026-12-04).
        base = PurePosixPath(root) / "sglang"
        return {"TVM_FFI_CACHE_DIR": str(base / "tvm-ffi"), "TRITON_CACHE_DIR": str(base / "triton"),
                "SGLANG_DG_CACHE_DIR": str(base / "deep_gemm"), "SGLANG_CACHE_DIR": str(base / "sglang"),
                "TORCHINDUCTOR_CACHE_DIR": str(base / "inductor")}

    # Layout 2: inductor's cache joined the pack; a pack of layout 1 lacks it (a new key).
    compile_cache_layout = "2: inductor"

    # -- what the engine reports it got ---------------------------------------------------
    # Log formats as SGLang 0.5.16 writes them (file:line of its wheel in
    # tests/fixtures/engine-logs/sglang-0.5.16-h200-constructed/README.md); the older ones (0.4.x
    # to 0.5.9: "KV Cache is allocated. #tokens: ...", "Capture cuda graph bs [...]") still read.
    def reported_capacity(self, log_text: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        # managers/scheduler.py: "[2026-12-01 10:00:00 DP1 TP0] max_total_num_tokens=1454242,
        #  chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=83, context_len=32768,
        #  available_gpu_mem=12.34 GB"; max_running_requests is the effective one, after SGLang's own caps.
        summary = list(re.finditer(r"^(?:\[(?:[^\]\n]*?\bDP(\d+)\b)?[^\]\n]*\] )?max_total_num_tokens=(\d+),([^\n]*)",
                                   log_text, re.MULTILINE))
        if summary:
            out["kv_cache_tokens"] = _as_int(per_rank_sum([(m.group(1) or "", float(m.group(2))) for m in summary]))
            out["max_total_num_tokens"] = out["kv_cache_tokens"]
            fields = dict(re.findall(r"(\w+)=(-?[\d.]+)", summary[0].group(3)))
            running = [(m.group(1) or "", float(v)) for m in summary
                       for v in re.findall(r"max_running_requests=(\d+)", m.group(3))]
            if running:
                out["max_running_requests"] = _as_int(per_rank_sum(running))
            if "chunked_prefill_size" in fields:  # SGLang's batch token budget: chunked_prefill_size
                out["max_batched_tokens"] = int(fields["chunked_prefill_size"])
            if "max_prefill_tokens" in fields:
                out["max_prefill_tokens"] = int(fields["max_prefill_tokens"])
            if "context_len" in fields:
                out["max_model_len"] = int(fields["context_len"])
                # Derived, not logged: how many full-length requests the KV pool holds (vLLM logs this).
                out["max_concurrency_at_max_len"] = round(out["kv_cache_tokens"] / int(fields["context_len"]), 2)
        # mem_cache/kv_cache_configurator.py: the cap SGLang put on --max-running-requests.
        m = _first(r"max_running_requests was reduced from the requested (\d+) to (\d+)", log_text)
        if m:
            out["max_running_requests_requested"] = int(m.group(1))
            out.setdefault("max_running_requests", int(m.group(2)))
        # mem_cache/memory_pool.py: "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1454242,
        #  K size: 5.55 GB, V size: 5.55 GB" (or "KV size: ..." for a single-buffer pool).
        m = _first(r"KV Cache is allocated\. (?:dtype: (?:torch\.)?(\w+), )?#tokens: (\d+), "
                   r"(?:K size: ([\d.]+) GB, V size: ([\d.]+) GB|KV size: ([\d.]+) GB)", log_text)
        if m:
            out.setdefault("kv_cache_tokens", int(m.group(2)))
            gib = float(m.group(3)) + float(m.group(4)) if m.group(3) else float(m.group(5))
            out["kv_cache_memory_gib"] = round(gib, 2)
            if m.group(1):
                out["kv_cache_torch_dtype"] = m.group(1)
        # mem_cache/memory_pool.py: hybrid models (Gated DeltaNet, Mamba) hold one state slot per
        # running request: "Mamba Cache is allocated. max_mamba_cache_size: 416, conv_state size:
        #  0.40GB, ssm_state size: 18.28GB ..."
        m = _first(r"Mamba Cache is allocated\. max_mamba_cache_size: (\d+), conv_state size: ([\d.]+) ?GB, "
                   r"ssm_state size: ([\d.]+) ?GB", log_text)
        if m:
            out["mamba_cache_size"] = int(m.group(1))
            out["mamba_cache_memory_gib"] = round(float(m.group(2)) + float(m.group(3)), 2)
        # The ServerArgs(...) dump at start: what the server was actually configured with.
        args = _server_args(log_text)
        if "disable_radix_cache" in args:
            out["prefix_caching"] = args["disable_radix_cache"] != "True"
        if "kv_cache_dtype" in args:
            out["kv_cache_dtype"] = args["kv_cache_dtype"].strip("'\"")
        if args.get("quantization", "None") != "None":
            out["quantization"] = args["quantization"].strip("'\"")
        for key, name in (("tensor_parallel", "tp_size"), ("data_parallel", "dp_size"),
                          ("expert_parallel", "ep_size")):
            if name in args and args[name].isdigit():
                out[key] = int(args[name])
        if "mem_fraction_static" in args:
            try:
                out["gpu_memory_fraction"] = float(args["mem_fraction_static"])
            except ValueError:
                pass
        # 0.5.16 (model_runner_components/cuda_graph_setup.py): "Capture target decode CUDA graph begin.
        #  backend=full, num_tokens_per_req=1, bs=[1, 2, 4, ...], avail mem=..."; before: "Capture cuda graph bs [...]".
        m = (_first(r"Capture (?:target )?(?:decode|verify) CUDA graph begin\.[^\n]*?\bbs=\[([\d,\s]*)\]", log_text)
             or _first(r"Capture cuda graph bs \[([\d,\s]*)\]", log_text))
        if m:
            sizes = sorted(_int_list(m.group(1)))
            out["cuda_graph_sizes"] = sizes
            out["cuda_graph_max_size"] = max(sizes) if sizes else 0
        if "disable_cuda_graph" in args or m:
            out["cuda_graph"] = args.get("disable_cuda_graph") != "True" and bool(m is None or out["cuda_graph_sizes"])
        return out

    def reported_startup(self, log_text: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        # model_executor/model_runner.py: "Load weight end. elapsed=0.95 s, type=Qwen3_5MoeForConditionalGeneration,
        #  avail mem=74.15 GB, mem usage=66.81 GB." (0.5.9 and before: "Load weight end. type=..., mem usage=...")
        m = _first(r"Load weight end\. (?:elapsed=([\d.]+) s, )?[^\n]*?mem usage=([\d.]+) GB", log_text)
        if m:
            out["model_memory_gib"] = float(m.group(2))
            if m.group(1):
                out["model_load_s"] = float(m.group(1))
        m = _first(r"Capture (?:target )?(?:decode|verify) CUDA graph end\. elapsed=([\d.]+) s, mem usage=(-?[\d.]+) GB",
                   log_text) or _first(r"Capture cuda graph end\. Time elapsed: ([\d.]+) s\. mem usage=(-?[\d.]+) GB",
                                       log_text)
        if m:
            out["cuda_graph_capture_s"], out["cuda_graph_memory_gib"] = float(m.group(1)), float(m.group(2))
        m = _first(r"Capture (?:target )?prefill CUDA graph end\. elapsed=([\d.]+) s", log_text)
        if m:
            out["prefill_cuda_graph_capture_s"] = float(m.group(1))
        # which fused-MoE kernel configs ran (the up and the down projection's): tuned files or the default
        out.update(moe_kernel_config(log_text))
        return out


def _server_args(log_text: str) -> dict[str, str]:
    """Top-level `name=value` pairs of SGLang's `server_args=ServerArgs(...)` line, values as written."""
    m = re.search(r"server_args=ServerArgs\((.*)\)\s*$", log_text, re.MULTILINE)
    if not m:
        return {}
    return dict(re.findall(r"(?:^|, )(\w+)=('[^']*'|\"[^\"]*\"|[^,()\[\]{}]+)", m.group(1)))
