"""Whether a trial fits its GPUs, and how many tokens of KV cache it gets (pure), before anything starts.

The model: per GPU, the engine may use `gpu_memory_utilization` of the GPU's memory; the weights
(bytes by dtype, from the model's config.json: embeddings, attention, linear attention, experts),
the activation and CUDA-graph reserve (the engine's, `farm.engines.base.MemoryReserve`, a base plus
a cost per batched token) come off it, and the rest is KV cache. Bytes of KV cache per token count
only the layers that hold one: in a hybrid model (Qwen3.5: 30 Gated DeltaNet layers, 10 full
attention) the linear-attention layers keep a fixed state per sequence, not per token, so only the
full-attention layers count, times the engine's measured overhead for hybrid pools. Tensor
parallelism splits weights and KV heads; data parallelism makes replicas (their tokens add up, as
the engines' logs do); expert parallelism spreads the experts over every GPU of the trial.

A trial whose KV cache would be empty, or too small for one request of `max_model_len`, does not
fit: the engine would refuse to start (its log: not enough KV-cache memory for max-model-len).
The predictor's error is measured, not assumed: every trial records its prediction beside what its
engine reported (`kv_cache_tokens`), and `prediction_error` says by how much they differ.

An engine with a static budget (SGLang, `MemoryReserve.budget == "static"`) is modelled otherwise:
its fraction is of the memory free when it starts (the GPU less `startup_gib`), and holds only the
weights and the cache pools; activations and CUDA graphs live outside it, so nothing per batched
token comes off the pools. In a hybrid model the pools first give the linear-attention state its
slots (a fixed count from the flags, or `state_pool_share` of the pools, each slot one sequence's
conv window and recurrent state of every linear layer), and the rest is KV cache. How many
requests run at once follows: the flags' or the engine's default, at most half the KV tokens, and
at most the slots over the slots each request holds. Such an engine clips a request longer than
its KV cache instead of refusing to start, so `max_model_len` prunes nothing there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from farm.engines.memory import MemoryReserve, MemorySettings  # noqa: F401  (re-exported)
from farm.strict import Strict

GIB = 1024 ** 3
MIB = 1024 ** 2
# Memory of one GPU as its driver reports it (nvidia-smi), by the names Ray gives them.
GPU_MEMORY_BYTES: dict[str, int] = {
    "H200": 143771 * MIB,    # ../shared/reference/h200.md
    "H100": 81559 * MIB,
    "A100": 81920 * MIB,
    "L40S": 46068 * MIB,
}
DTYPE_BYTES = {"bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "auto": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
               "float32": 4, "fp32": 4}


class ModelShape(Strict):
    """The numbers of a model's config.json that decide its memory (the language model only)."""

    hidden_size: int
    num_layers: int
    full_attention_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool = False
    intermediate_size: int = 0
    num_experts: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    attention_output_gate: bool = False
    mtp_layers: int = 0
    dtype_bytes: int = 2
    state_dtype_bytes: int = Field(default=4, description="The linear-attention recurrent state's (mamba_ssm_dtype; float32 "
                                   "where the config names none).")
    max_position_embeddings: int = 0


class NotPredicted(ValueError):
    """A model whose memory farm cannot size (its config.json is of an architecture the model here
    does not know, or cannot be read): the trial is "not predicted: <why>", never pruned, never a
    traceback."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True)
class NoPrediction:
    """What `trial_fit` gives for a model it cannot size: treated as fitting (the trial starts and
    its engine says), with the reason shown where a prediction would be."""

    reason: str
    fits: bool = True
    kv_cache_tokens: None = None
    max_running_requests: None = None


# The language-model keys the predictor needs from a config.json (or its `text_config`).
_REQUIRED_KEYS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")


def _architecture(config: Mapping[str, Any]) -> str:
    names = config.get("architectures")
    if isinstance(names, list) and names and isinstance(names[0], str):
        return names[0][:60]
    return str(config.get("model_type") or "unnamed")[:60]


def shape_from_config(config: Mapping[str, Any]) -> ModelShape:
    """A config.json (a multimodal one's `text_config`) -> ModelShape; `NotPredicted` for an
    architecture the predictor does not model (its keys missing, of the wrong type, or a layout
    it would size wrongly)."""
    if not isinstance(config, Mapping):
        raise NotPredicted("config.json is not a JSON object")
    text = config.get("text_config") or config
    if not isinstance(text, Mapping):
        raise NotPredicted("config.json's text_config is not a JSON object")
    arch = _architecture(config)
    missing = [k for k in _REQUIRED_KEYS if k not in text]
    if missing:
        raise NotPredicted(f"architecture {arch} is not one farm's memory model knows (its config.json has no "
                           f"{', '.join(missing)})")
    if text.get("kv_lora_rank") or config.get("is_encoder_decoder"):
        layout = "multi-head latent attention (kv_lora_rank)" if text.get("kv_lora_rank") else "an encoder-decoder"
        raise NotPredicted(f"architecture {arch} is {layout}, which farm's memory model does not size")
    for key in _REQUIRED_KEYS:
        value = text[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise NotPredicted(f"config.json: {key} is {str(value)[:20]!r}, not a whole number >= 1 "
                               f"(architecture {arch})")
    try:
        return _shape(config, dict(text))
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as exc:
        raise NotPredicted(f"config.json of architecture {arch} cannot be read as one farm's memory model "
                           f"knows ({type(exc).__name__}: {str(exc)[:80]})") from None


def _shape(config: Mapping[str, Any], t: dict) -> ModelShape:
    layers = int(t["num_hidden_layers"])
    types = t.get("layer_types")
    if types:
        full = sum(1 for k in types if k == "full_attention")
    elif t.get("full_attention_interval"):
        full = layers // int(t["full_attention_interval"])
    else:
        full = layers
    heads = int(t["num_attention_heads"])
    hidden = int(t["hidden_size"])
    dtype = str(t.get("torch_dtype") or t.get("dtype") or config.get("torch_dtype") or "bfloat16")
    return ModelShape(
        hidden_size=hidden, num_layers=layers, full_attention_layers=full, num_attention_heads=heads,
        num_kv_heads=int(t.get("num_key_value_heads") or heads), head_dim=int(t.get("head_dim") or hidden // heads),
        vocab_size=int(t["vocab_size"]), tie_word_embeddings=bool(t.get("tie_word_embeddings", False)),
        intermediate_size=int(t.get("intermediate_size") or 0), num_experts=int(t.get("num_experts") or 0),
        moe_intermediate_size=int(t.get("moe_intermediate_size") or 0),
        shared_expert_intermediate_size=int(t.get("shared_expert_intermediate_size") or 0),
        linear_key_heads=int(t.get("linear_num_key_heads") or 0), linear_value_heads=int(t.get("linear_num_value_heads") or 0),
        linear_key_head_dim=int(t.get("linear_key_head_dim") or 0),
        linear_value_head_dim=int(t.get("linear_value_head_dim") or 0),
        linear_conv_kernel=int(t.get("linear_conv_kernel_dim") or 0),
        attention_output_gate=bool(t.get("attn_output_gate", "qwen3_5" in str(t.get("model_type", "")))),
        mtp_layers=int(t.get("mtp_num_hidden_layers") or 0), dtype_bytes=DTYPE_BYTES.get(dtype, 2),
        state_dtype_bytes=DTYPE_BYTES.get(str(t.get("mamba_ssm_dtype") or "float32"), 4),
        max_position_embeddings=int(t.get("max_position_embeddings") or 0))


class ParameterCounts(Strict):
    embeddings: int = Field(description="Input embeddings and the LM head (bf16 even under FP8).")
    dense: int = Field(description="Attention, linear attention, shared experts, routers: quantized by FP8, split by TP.")
    experts: int = Field(description="Routed experts: quantized by FP8, split by TP or spread by EP.")

    @property
    def total(self) -> int:
        return self.embeddings + self.dense + self.experts


def parameter_counts(s: ModelShape, *, with_mtp: bool = False) -> ParameterCounts:
    h = s.hidden_size
    q_out = s.num_attention_heads * s.head_dim * (2 if s.attention_output_gate else 1)
    attention = h * q_out + 2 * h * s.num_kv_heads * s.head_dim + s.num_attention_heads * s.head_dim * h
    key_dim, value_dim = s.linear_key_heads * s.linear_key_head_dim, s.linear_value_heads * s.linear_value_head_dim
    linear = (h * (2 * key_dim + 2 * value_dim) + h * 2 * s.linear_value_heads
              + (2 * key_dim + value_dim) * s.linear_conv_kernel + value_dim * h)
    if s.num_experts:
        experts_per_layer = s.num_experts * 3 * h * s.moe_intermediate_size
        dense_mlp = 3 * h * s.shared_expert_intermediate_size + h * s.num_experts + h
    else:
        experts_per_layer, dense_mlp = 0, 3 * h * s.intermediate_size
    layers = s.num_layers + (s.mtp_layers if with_mtp else 0)
    full = s.full_attention_layers + (s.mtp_layers if with_mtp else 0)
    dense = full * attention + (s.num_layers - s.full_attention_layers) * linear + layers * dense_mlp
    dense += (2 * h * h if with_mtp and s.mtp_layers else 0)  # the MTP head's projection of [embedding, hidden]
    embeddings = s.vocab_size * h * (1 if s.tie_word_embeddings else 2)
    return ParameterCounts(embeddings=embeddings, dense=dense, experts=layers * experts_per_layer)


class FitPrediction(Strict):
    fits: bool
    kv_cache_tokens: int = Field(description="Predicted KV-cache tokens, summed over data-parallel replicas (as logs say).")
    weights_gib: float = Field(description="Weights per GPU.")
    kv_cache_gib: float = Field(description="KV cache per GPU.")
    reserve_gib: float = Field(description="Activation and CUDA-graph reserve per GPU (static budget: all it leaves out).")
    usable_gib: float = Field(description="What the engine may use of each GPU.")
    state_slots: int | None = Field(default=None, description="Linear-attention state slots per replica (hybrid model: "
                                    "SGLang's mamba pool, vLLM's state blocks of its KV pool).")
    state_cache_gib: float | None = Field(default=None, description="Their memory per GPU.")
    max_running_requests: int | None = Field(default=None, description="Requests at once, summed over replicas (static "
                                             "budget: the engine's own cap; total: what the flags or defaults allow).")
    static: bool = Field(default=False, description="The engine budgets statically (SGLang): the fraction holds weights "
                         "and cache pools only.")
    repair_running_requests: int | None = Field(default=None, description="Where only the requests at once keep it from "
                                                "starting: the most it would start with, per replica (a search's repair).")
    reason: str = ""


def weights_bytes(shape: ModelShape, m: MemorySettings) -> float:
    """Weights per GPU."""
    counts = parameter_counts(shape, with_mtp=m.speculative_mtp)
    quant = DTYPE_BYTES.get(m.weights_dtype, shape.dtype_bytes)
    gpus = m.tensor_parallel * m.data_parallel
    spread = gpus if m.expert_parallel else m.tensor_parallel
    return (counts.embeddings * shape.dtype_bytes / m.tensor_parallel + counts.dense * quant / m.tensor_parallel
            + counts.experts * quant / spread)


def kv_bytes_per_token(shape: ModelShape, m: MemorySettings, reserve: MemoryReserve | None = None) -> float:
    """KV-cache bytes one token takes on one GPU: K and V of the full-attention layers' KV heads on it."""
    heads = max(1, math.ceil(shape.num_kv_heads / m.tensor_parallel))
    kv = DTYPE_BYTES.get(m.kv_dtype, shape.dtype_bytes) if m.kv_dtype != "auto" else shape.dtype_bytes
    per = shape.full_attention_layers * 2 * heads * shape.head_dim * kv
    if reserve is not None and shape.full_attention_layers < shape.num_layers:
        per *= reserve.hybrid_kv_overhead * (reserve.hybrid_prefix_caching_overhead if m.prefix_caching else 1.0)
    return per


def state_bytes_per_request(shape: ModelShape, m: MemorySettings) -> float:
    """One sequence's linear-attention state on one GPU: per linear layer the conv window (its
    last kernel - 1 inputs of q, k and v, in the model's dtype) and the recurrent state (value
    heads x value dim x key dim, in the state dtype); tensor parallelism splits the heads."""
    linear = shape.num_layers - shape.full_attention_layers
    if not linear or not shape.linear_value_heads:
        return 0.0
    tp = m.tensor_parallel
    conv_dim = shape.linear_value_heads * shape.linear_value_head_dim + 2 * shape.linear_key_heads * shape.linear_key_head_dim
    conv = math.ceil(conv_dim / tp) * max(shape.linear_conv_kernel - 1, 0) * shape.dtype_bytes
    recurrent = (math.ceil(shape.linear_value_heads / tp) * shape.linear_value_head_dim * shape.linear_key_head_dim
                 * shape.state_dtype_bytes)
    return float(linear * (conv + recurrent))


def _running_requests(shape: ModelShape, m: MemorySettings, reserve: MemoryReserve, tokens: int,
                      slots: int | None) -> int | None:
    if reserve.running_requests_bounds is None:
        return None
    fewest, most = reserve.running_requests_bounds
    context = m.max_model_len or shape.max_position_embeddings
    default = most
    if context and reserve.running_requests_per_context:
        default = max(min(int(tokens / context * reserve.running_requests_per_context), most), fewest)
    n = min(m.max_running_requests if m.max_running_requests is not None else default, tokens // 2)
    if slots is not None:
        n = min(n, slots // max(m.state_slots_per_request, 1))
    return n


def _predict_static(shape: ModelShape, m: MemorySettings, reserve: MemoryReserve, gpu_bytes: int) -> FitPrediction:
    fraction = m.gpu_memory_utilization if m.gpu_memory_utilization is not None else reserve.default_gpu_memory_utilization
    free = gpu_bytes - reserve.startup_gib * GIB
    usable = fraction * free
    weights = weights_bytes(shape, m) + reserve.load_extra_gib.get(m.weights_dtype, 0.0) * GIB
    pools = usable - weights
    per_request = state_bytes_per_request(shape, m) if reserve.state_pool_share is not None else 0.0
    slots, state = None, 0.0
    if per_request:
        slots = m.state_slots if m.state_slots is not None else int(max(pools, 0) * reserve.state_pool_share // per_request)
        state = slots * per_request
    kv = pools - state
    per_token = kv_bytes_per_token(shape, m, reserve)
    tokens = int(max(kv, 0) // per_token) if per_token else 0
    requests = _running_requests(shape, m, reserve, tokens, slots)
    dp = m.data_parallel
    out = dict(weights_gib=round(weights / GIB, 2), kv_cache_gib=round(kv / GIB, 2), static=True,
               reserve_gib=round((gpu_bytes - usable) / GIB, 2), usable_gib=round(usable / GIB, 2),
               kv_cache_tokens=tokens * dp, state_slots=slots,
               state_cache_gib=round(state / GIB, 2) if slots is not None else None,
               max_running_requests=requests * dp if requests is not None else None)
    if pools <= 0:
        return FitPrediction(fits=False, reason=f"weights {weights / GIB:.1f} GiB per GPU exceed the {usable / GIB:.1f} GiB "
                             f"static budget ({fraction:.3g} of the {free / GIB:.1f} GiB free at start)", **out)
    if slots is not None and slots <= 0:
        return FitPrediction(fits=False, reason=f"the {pools / GIB:.1f} GiB of cache pools per GPU hold no linear-attention "
                             f"state slot of {per_request / MIB:.1f} MiB", **out)
    if tokens <= 0:
        held = f"{slots:,} state slots of {per_request / MIB:.1f} MiB leave" if slots else "there is"
        return FitPrediction(fits=False, reason=f"{held} nothing of the {pools / GIB:.1f} GiB of cache pools per GPU "
                             f"for the KV cache", **out)
    if requests is not None and requests <= 0:
        return FitPrediction(fits=False, reason=f"{slots:,} state slots cannot hold one request "
                             f"({m.state_slots_per_request} slots each)", **out)
    return FitPrediction(fits=True, **out)


def predict(shape: ModelShape, m: MemorySettings, reserve: MemoryReserve, gpu_bytes: int) -> FitPrediction:
    if reserve.budget == "static":
        return _predict_static(shape, m, reserve, gpu_bytes)
    util = m.gpu_memory_utilization if m.gpu_memory_utilization is not None else reserve.default_gpu_memory_utilization
    batched = m.max_batched_tokens or reserve.default_batched_tokens
    usable = util * gpu_bytes
    weights = weights_bytes(shape, m)
    held = (reserve.reserve_base_gib * GIB + reserve.reserve_per_batched_token_bytes * batched
            + reserve.reserve_per_running_request_bytes * (m.max_running_requests or 0))
    kv = usable - weights - held
    per_token = kv_bytes_per_token(shape, m, reserve)
    tokens = int(max(kv, 0) / per_token) if per_token else 0
    blocks = state_blocks(shape, m, reserve, max(kv, 0))
    out = dict(weights_gib=round(weights / GIB, 2), kv_cache_gib=round(kv / GIB, 2), reserve_gib=round(held / GIB, 2),
               usable_gib=round(usable / GIB, 2), kv_cache_tokens=tokens * m.data_parallel, state_slots=blocks,
               max_running_requests=m.max_running_requests * m.data_parallel if m.max_running_requests else None)
    if kv <= 0:
        return FitPrediction(fits=False, reason=f"weights {weights / GIB:.1f} GiB and reserve {held / GIB:.1f} GiB per GPU "
                             f"exceed the {usable / GIB:.1f} GiB the engine may use ({util:g} of the GPU)", **out)
    if m.max_model_len and tokens < m.max_model_len:
        return FitPrediction(fits=False, reason=f"KV cache of {tokens:,} tokens per replica cannot hold one request of "
                             f"max_model_len {m.max_model_len:,}", **out)
    if blocks is not None and m.full_cuda_graphs and m.max_running_requests and m.max_running_requests > blocks:
        repair = int(blocks * (1 - STATE_BLOCKS_MARGIN))
        return FitPrediction(fits=False, repair_running_requests=repair if repair >= 1 else None, reason=(
            f"{m.max_running_requests:,} requests at once (max_num_seqs) exceed the ~{blocks:,} state blocks the "
            f"hybrid model's linear-attention layers get per replica (one per running request with full CUDA "
            f"graphs: the engine refuses to start)"), **out)
    return FitPrediction(fits=True, **out)


# A repair caps running requests this far below the predicted state blocks: the predictor's
# error on them was -0.9 % on the H100 (1,502 predicted, 1,515 logged) and within 0.4 % on the
# H200's KV-cache tokens, so 3 % keeps a repaired command clear of the engine's own check.
STATE_BLOCKS_MARGIN = 0.03


def state_blocks(shape: ModelShape, m: MemorySettings, reserve: MemoryReserve, kv_bytes: float) -> int | None:
    """Blocks of an engine's KV pool that hold a hybrid model's linear-attention state as well
    (vLLM's hybrid allocator, `MemoryReserve.state_in_kv_blocks`); None for any other engine or
    model. The attention block grows, by `kv_block_alignment` tokens, until one attention layer's
    page holds one linear layer's state (conv window and recurrent state), then the state page is
    padded to it; layers are grouped so every group has as many layers as the smallest kind (or
    the largest, when the kinds differ by less than 1.5x), and a block is one page of every layer
    of a group: blocks = the pool's bytes / (group size x page)."""
    linear = shape.num_layers - shape.full_attention_layers
    per_request = state_bytes_per_request(shape, m)
    if not (reserve.state_in_kv_blocks and linear and shape.full_attention_layers and per_request):
        return None
    heads = max(1, math.ceil(shape.num_kv_heads / m.tensor_parallel))
    kv = DTYPE_BYTES.get(m.kv_dtype, shape.dtype_bytes) if m.kv_dtype != "auto" else shape.dtype_bytes
    token_bytes = 2 * heads * shape.head_dim * kv          # one attention layer, one token
    state_page = per_request / linear                       # one linear layer, one request
    align = max(reserve.kv_block_alignment, 1)
    block_tokens = align * math.ceil(state_page / (align * token_bytes))
    page = block_tokens * token_bytes
    fewest, most = sorted((shape.full_attention_layers, linear))
    group = most if most < fewest * 1.5 else fewest
    return int(kv_bytes // (group * page))


def prediction_error(predicted: int | None, reported: int | None) -> float | None:
    """predicted / reported - 1 (+0.05: the predictor said 5 % more tokens than the engine got)."""
    if not predicted or not reported:
        return None
    return predicted / reported - 1


class KvCheck(Strict):
    """One trial's predicted KV-cache tokens beside what its engine reported."""

    trial: str
    label: str
    predicted: int
    reported: int | None = None
    running_predicted: int | None = Field(default=None, description="Requests at once, where the model predicts the engine's own cap (SGLang).")
    running_reported: int | None = None

    @property
    def error(self) -> float | None:
        return prediction_error(self.predicted, self.reported)


def check_lines(checks: list[KvCheck]) -> list[str]:
    """The predictor's error over a sweep's trials, one line each (those whose engine reported its
    tokens), under a line with the largest; none when no trial has both numbers."""
    lines = [f"  {c.label}: predicted {c.predicted:,}, reported {c.reported:,} ({c.error * 100:+.2f} %)"
             + (f"; requests at once predicted {c.running_predicted:,}, reported {c.running_reported:,}"
                if c.running_predicted is not None and c.running_reported is not None else "")
             for c in checks if c.error is not None]
    if lines:
        errors = [abs(c.error) for c in checks if c.error is not None]
        lines.insert(0, f"memory-fit predictor, KV-cache tokens: largest error {max(errors) * 100:.2f} % over "
                        f"{len(errors)} trial(s)")
    return lines


def reserve_needs_running(reserve: MemoryReserve) -> bool:
    """Whether the prediction needs the engine's default requests at once (a total budget: its
    per-request buffers, and a hybrid model's state blocks); a static budget derives its own."""
    return reserve.budget == "total" and (reserve.state_in_kv_blocks or reserve.reserve_per_running_request_bytes > 0)


def trial_fit(engine: str, flags: Mapping[str, Any], model_quantization: str | None, config: Mapping[str, Any] | None,
              accelerator: str | None) -> FitPrediction | NoPrediction | None:
    """The prediction for one trial (its engine's flags, all of them), or None where farm has no
    model for it: an engine without a memory reserve, no config.json, a GPU of unknown memory;
    `NoPrediction` (with why) for a config.json the predictor cannot size, or one that cannot be
    read (`NotPredicted` handed in by the reader)."""
    from farm.engines import get_engine

    adapter = get_engine(engine)
    if adapter.memory_reserve is None or config is None or accelerator not in GPU_MEMORY_BYTES:
        return None
    settings = adapter.memory_settings(flags, model_quantization)
    if settings is None:
        return None
    if isinstance(config, NotPredicted):
        return NoPrediction(config.reason)
    try:
        shape = shape_from_config(config)  # first: an engine's default fraction reads the same config
        if settings.max_running_requests is None and reserve_needs_running(adapter.memory_reserve):
            running = adapter.default_running_requests(flags, GPU_MEMORY_BYTES[accelerator])
            if running is not None:
                settings = settings.model_copy(update={"max_running_requests": running})
        if settings.gpu_memory_utilization is None:
            fraction = adapter.default_memory_fraction(flags, GPU_MEMORY_BYTES[accelerator], config)
            if fraction is not None:
                settings = settings.model_copy(update={"gpu_memory_utilization": fraction})
    except NotPredicted as exc:
        return NoPrediction(exc.reason)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        return NoPrediction(f"config.json of architecture {_architecture(config)} cannot be read as one farm's "
                            f"memory model knows ({type(exc).__name__})")
    return predict(shape, settings, adapter.memory_reserve, GPU_MEMORY_BYTES[accelerator])
