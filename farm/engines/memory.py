"""What an engine's flags say about its memory, and the engine's measured memory habits.

The models the memory-fit predictor (farm/analysis/memory_fit.py) reads; each engine adapter
fills them from its own flags (`Engine.memory_settings`) and states its reserve
(`Engine.memory_reserve`) with where its numbers come from.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MemorySettings(_Strict):
    """What of a trial's flags decides its memory, in engine-neutral terms (the engine reads its flags)."""

    weights_dtype: str = Field(default="bf16", description="bf16, or fp8 (a quantized checkpoint or online FP8).")
    kv_dtype: str = "auto"
    tensor_parallel: int = 1
    data_parallel: int = 1
    expert_parallel: bool = False
    gpu_memory_utilization: float | None = Field(default=None, description="None: the engine's default.")
    max_batched_tokens: int | None = Field(default=None, description="None: the engine's default.")
    max_model_len: int | None = None
    prefix_caching: bool = False
    speculative_mtp: bool = False


class MemoryReserve(_Strict):
    """An engine's memory habits, measured (farm/engines/*: each says where its numbers come from)."""

    default_gpu_memory_utilization: float
    default_batched_tokens: int
    reserve_base_gib: float = Field(description="Activations, CUDA graphs, the allocator's own, at 0 batched tokens.")
    reserve_per_batched_token_bytes: float = Field(description="Activation peak per token of the batch budget.")
    hybrid_kv_overhead: float = Field(default=1.0, description="Bytes the pool takes per full-attention byte in a hybrid model.")
    hybrid_prefix_caching_overhead: float = Field(default=1.0, description="Further factor with prefix caching on a hybrid.")
    calibration: str = Field(default="", description="Which measurements the numbers come from.")


