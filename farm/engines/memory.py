"""What an engine's flags say about its memory, and the engine's measured memory habits.

The models the memory-fit predictor (farm/analysis/memory_fit.py) reads; each engine adapter
fills them from its own flags (`Engine.memory_settings`) and states its reserve
(`Engine.memory_reserve`) with where its numbers come from.

Two ways an engine budgets a GPU (`MemoryReserve.budget`):
- "total" (vLLM): a fraction of the GPU's memory holds weights, activations, CUDA graphs and the
  KV cache together, so the activation reserve comes off the KV cache.
- "static" (SGLang): a fraction of the memory free when the engine starts holds the weights and
  the cache pools only; activations and CUDA graphs live in the rest. In a hybrid model the pools
  are split between a state pool (one fixed-size slot per sequence, for the linear-attention
  layers) and the KV cache of the full-attention layers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from farm.strict import Strict


class MemorySettings(Strict):
    """What of a trial's flags decides its memory, in engine-neutral terms (the engine reads its flags)."""

    weights_dtype: str = Field(default="bf16", description="bf16, or fp8 (a quantized checkpoint or online FP8).")
    kv_dtype: str = "auto"
    tensor_parallel: int = 1
    data_parallel: int = 1
    expert_parallel: bool = False
    gpu_memory_utilization: float | None = Field(
        default=None, description="The fraction the engine budgets (vLLM --gpu-memory-utilization, SGLang "
                                  "--mem-fraction-static); None: the engine's default.")
    max_batched_tokens: int | None = Field(default=None, description="None: the engine's default.")
    max_model_len: int | None = None
    prefix_caching: bool = False
    speculative_mtp: bool = False
    max_running_requests: int | None = Field(default=None, description="Asked for, per replica; None: the engine's default.")
    state_slots: int | None = Field(default=None, description="State slots the flags fix (SGLang: --max-mamba-cache-size, or "
                                    "--max-running-requests with the radix cache off); None: sized from memory.")
    state_slots_per_request: int = Field(default=1, description="State slots one running request holds (SGLang keeps "
                                         "extra copies for its radix cache).")
    full_cuda_graphs: bool = Field(default=True, description="Whether the engine captures FULL decode CUDA graphs "
                                   "(vLLM: each running request then needs a state block of its own).")


class MemoryReserve(Strict):
    """An engine's memory habits, measured (farm/engines/*: each says where its numbers come from)."""

    default_gpu_memory_utilization: float
    default_batched_tokens: int
    reserve_base_gib: float = Field(description="Activations, CUDA graphs, the allocator's own, at 0 batched tokens.")
    reserve_per_batched_token_bytes: float = Field(description="Activation peak per token of the batch budget.")
    reserve_per_running_request_bytes: float = Field(default=0.0, description="What each request the engine may run at "
                                                     "once holds outside the KV cache (its per-request buffers).")
    hybrid_kv_overhead: float = Field(default=1.0, description="Bytes the pool takes per full-attention byte in a hybrid model.")
    hybrid_prefix_caching_overhead: float = Field(default=1.0, description="Further factor with prefix caching on a hybrid.")
    budget: Literal["total", "static"] = Field(default="total", description="What the fraction budgets (module doc).")
    startup_gib: float = Field(default=0.0, description="static: memory gone before the weights load (CUDA context); "
                                                        "the fraction is of what is left.")
    load_extra_gib: dict[str, float] = Field(default_factory=dict, description="static: what the weight load takes beyond "
                                             "farm's count of the language model, by weights dtype.")
    state_pool_share: float | None = Field(default=None, description="static, hybrid model: the share of the pools the "
                                           "state slots take when the flags fix no count.")
    running_requests_per_context: float | None = Field(default=None, description="static: requests at once by default per "
                                                       "context length of KV-cache tokens...")
    running_requests_bounds: tuple[int, int] | None = Field(default=None, description="...clamped to (fewest, most).")
    state_in_kv_blocks: bool = Field(default=False, description="total budget, hybrid model: the linear-attention state "
                                     "lives in the KV pool's blocks (vLLM's hybrid allocator: one block per running "
                                     "request and state group; with FULL CUDA graphs at most one running request a block).")
    kv_block_alignment: int = Field(default=16, description="state_in_kv_blocks: the attention block size is a multiple "
                                    "of this, grown until an attention page holds one state page.")
    calibration: str = Field(default="", description="Which measurements the numbers come from.")


