"""SGLang's knob renderers: each of farm's knobs (farm/study/knobs.py says what each means) as
SGLang's launch flags, `KNOB_RENDERERS`; a knob SGLang cannot serve raises `KnobError`
(unsupported). farm/engines/sglang.py's engine renders a trial through them."""

from __future__ import annotations

from typing import Any, Mapping

from farm.study.knobs import KnobError, Renderer, gpus_of

ONLINE_QUANTIZATION = ("fp8",)
KV_DTYPES = {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "bf16": "bf16"}
SCHEDULE_POLICIES = ("fcfs", "lpm", "random", "dfs-weight", "lof")
SPECULATIVE_ALGORITHMS = {"mtp": "NEXTN", "eagle": "EAGLE", "eagle3": "EAGLE3"}


def _quantization(q: str, knobs: Mapping[str, Any]) -> dict[str, Any]:
    if q not in ONLINE_QUANTIZATION:
        raise KnobError("quantization", f"farm maps SGLang's online quantization only for "
                        f"{', '.join(ONLINE_QUANTIZATION)}; for '{q}' give the study a model variant with "
                        f"quantization: {q}", unsupported=True)
    return {"quantization": q}


def _prefix_caching(on: bool, knobs: Mapping[str, Any]) -> dict[str, Any]:
    # The radix cache is on by default and SGLang has no flag that turns it on.
    return {} if on else {"disable-radix-cache": True}


def _kv_cache_dtype(dtype: str, knobs: Mapping[str, Any]) -> dict[str, Any]:
    return {} if dtype == "auto" else {"kv-cache-dtype": KV_DTYPES[dtype]}


def _kv_offload(gb: float | bool, knobs: Mapping[str, Any]) -> dict[str, Any]:
    if gb is False:
        return {}
    if knobs.get("prefix_caching") is False:
        raise KnobError("kv_offload", "SGLang's hierarchical cache extends the radix cache, which "
                        "prefix_caching: false disables", unsupported=True)
    if not float(gb).is_integer():
        raise KnobError("kv_offload", f"SGLang sizes its host KV cache in whole GB (--hicache-size), got {gb}",
                        unsupported=True)
    return {"enable-hierarchical-cache": True, "hicache-size": int(gb)}


def _cuda_graph(value: bool | int, knobs: Mapping[str, Any]) -> dict[str, Any]:
    if value is True:
        return {}
    if value is False:
        return {"disable-cuda-graph": True}
    return {"cuda-graph-max-bs": value}


# Parallel layout. Plain data parallelism in SGLang is independent replicas (--dp-size D with
# --tp-size T each: T*D GPUs). With expert parallelism the experts span every GPU: --tp-size
# becomes the total, attention runs data-parallel inside it (--enable-dp-attention) and
# --ep-size covers all GPUs, which is the layout of vLLM's --enable-expert-parallel with DP.


def _tensor_parallel(t: int, knobs: Mapping[str, Any]) -> dict[str, Any]:
    total = t * (knobs.get("data_parallel") or 1) if knobs.get("expert_parallel") else t
    return {"tp-size": total} if total > 1 else {}


def _data_parallel(d: int, knobs: Mapping[str, Any]) -> dict[str, Any]:
    if d == 1:
        return {}
    flags: dict[str, Any] = {"dp-size": d}
    if knobs.get("expert_parallel"):
        flags["enable-dp-attention"] = True
        flags["tp-size"] = gpus_of(knobs)
    return flags


def _expert_parallel(on: bool, knobs: Mapping[str, Any]) -> dict[str, Any]:
    if not on:
        return {}
    gpus = gpus_of(knobs)
    if gpus < 2:
        raise KnobError("expert_parallel", "expert parallelism needs tensor_parallel x data_parallel > 1",
                        unsupported=True)
    return {"ep-size": gpus, "tp-size": gpus}


def _speculative(spec: dict | bool, knobs: Mapping[str, Any]) -> dict[str, Any]:
    if spec is False:
        return {}
    algorithm = SPECULATIVE_ALGORITHMS.get(spec["method"])
    if algorithm is None:
        raise KnobError("speculative", f"farm does not map speculative method '{spec['method']}' onto SGLang "
                        f"(mapped: {', '.join(SPECULATIVE_ALGORITHMS)})", unsupported=True)
    n = spec["num_tokens"]
    # A chain of n drafted tokens: n draft steps, one candidate per step, n + 1 tokens verified.
    flags: dict[str, Any] = {"speculative-algorithm": algorithm, "speculative-num-steps": n,
                             "speculative-eagle-topk": 1, "speculative-num-draft-tokens": n + 1}
    if "draft_model" in spec:
        flags["speculative-draft-model-path"] = spec["draft_model"]
    return flags


def _scheduling_policy(policy: str, knobs: Mapping[str, Any]) -> dict[str, Any]:
    if policy == "priority":
        return {"schedule-policy": "priority", "enable-priority-scheduling": True}
    if policy not in SCHEDULE_POLICIES:
        raise KnobError("scheduling_policy", f"SGLang has no schedule policy '{policy}' "
                        f"(it has {', '.join(SCHEDULE_POLICIES)}, priority)", unsupported=True)
    return {"schedule-policy": policy}


KNOB_RENDERERS: dict[str, Renderer] = {
    "quantization": _quantization,
    "prefix_caching": _prefix_caching,
    "kv_cache_dtype": _kv_cache_dtype,
    "kv_offload": _kv_offload,
    "max_running_requests": lambda n, k: {"max-running-requests": n},
    "max_batched_tokens": lambda n, k: {"chunked-prefill-size": n},
    "gpu_memory_fraction": lambda f, k: {"mem-fraction-static": f},
    "cuda_graph": _cuda_graph,
    "tensor_parallel": _tensor_parallel,
    "data_parallel": _data_parallel,
    "expert_parallel": _expert_parallel,
    "speculative": _speculative,
    "max_model_len": lambda n, k: {"context-length": n},
    "scheduling_policy": _scheduling_policy,
}
