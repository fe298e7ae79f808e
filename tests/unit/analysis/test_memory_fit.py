"""The memory-fit predictor on the study's real model shapes: Qwen3.5-35B-A3B (the config
scripts/make-shape-model.py writes) in bf16 and FP8 on one H200, and the TP grid, against what
vLLM 0.20.2 reported on the lent H200 (bench/h200/engine-logs/, ../shared/reference/h200.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.analysis import memory_fit as mf
from sweeptools import shape_config
from farm.study.grid import expand
from farm.study.load import load_study

REPO = Path(__file__).resolve().parents[3]


CONFIG = shape_config()
BASE = {"reasoning-parser": "qwen3", "max-model-len": 32768}


def fit(flags: dict, quant: str | None = None, gpu: str = "H200") -> mf.FitPrediction:
    return mf.trial_fit("vllm", {**BASE, **flags}, quant, CONFIG, gpu)


def test_only_the_full_attention_layers_hold_kv_cache():
    shape = mf.shape_from_config(CONFIG)
    assert (shape.num_layers, shape.full_attention_layers) == (40, 10)
    # 10 layers x K and V x 2 KV heads x 256 dims x 2 bytes (bf16); fp8 halves it
    assert mf.kv_bytes_per_token(shape, mf.MemorySettings()) == 20480
    assert mf.kv_bytes_per_token(shape, mf.MemorySettings(kv_dtype="fp8")) == 10240
    assert mf.kv_bytes_per_token(shape, mf.MemorySettings(tensor_parallel=2)) == 10240


@pytest.mark.parametrize("quant, loaded_gib", [(None, 64.69), ("fp8", 33.37)])
def test_weights_match_what_vllm_loaded_on_the_h200(quant, loaded_gib):
    p = fit({}, quant)
    assert p.weights_gib == pytest.approx(loaded_gib, rel=0.01)  # "Model loading took 64.69 GiB memory"


@pytest.mark.parametrize("flags, quant, reported", [
    ({}, None, 2_747_830),                                                      # bf16 default start
    ({}, "fp8", 4_189_622),                                                     # FP8 at the default batch budget
    ({"enable-prefix-caching": True, "performance-mode": "throughput"}, "fp8", 3_694_160),  # 16,384-token budget
])
def test_kv_cache_tokens_within_one_percent_of_the_h200(flags, quant, reported):
    p = fit(flags, quant)
    assert p.fits
    assert abs(mf.prediction_error(p.kv_cache_tokens, reported)) < 0.01


def test_a_model_that_cannot_fit_is_pruned_with_the_reason():
    small = fit({}, None, gpu="L40S")  # 46 GB: bf16 weights alone are 64.6 GiB
    assert not small.fits and "exceed" in small.reason
    tight = fit({"gpu-memory-utilization": 0.5}, None)  # 70 GiB for 64.6 GiB of weights + reserve
    assert not tight.fits
    assert fit({"gpu-memory-utilization": 0.5}, "fp8").fits


def test_the_tp_grid_splits_weights_and_adds_replicas_tokens():
    study = load_study(REPO / "configs" / "qwen3.5-35b-a3b-h200.yaml")
    trials = [t for t in expand(study, "tp") if t.engine == "vllm"]
    preds = {}
    for t in trials:
        p = mf.trial_fit(t.engine, t.all_flags, study.models[t.model_key].quantization, CONFIG, "H200")
        preds[(t.knobs.get("quantization"), t.knobs.get("tensor_parallel", 1), t.knobs.get("data_parallel", 1),
               bool(t.knobs.get("expert_parallel")))] = p
    assert all(p.fits for p in preds.values())
    one, tp2, dp2 = preds[("none", 1, 1, False)], preds[("none", 2, 1, False)], preds[("none", 1, 2, False)]
    assert tp2.weights_gib == pytest.approx(one.weights_gib / 2, rel=0.01)
    assert dp2.weights_gib == pytest.approx(one.weights_gib, rel=0.01)
    # TP 2: half the weights and half the KV heads per GPU, so more than twice the tokens of TP 1
    assert tp2.kv_cache_tokens > 2 * one.kv_cache_tokens
    # DP 2: two full replicas, twice the tokens (the engine's log gives one line per replica; farm adds them)
    assert dp2.kv_cache_tokens == pytest.approx(2 * one.kv_cache_tokens, rel=0.001)
    ep = preds[("none", 1, 2, True)]
    assert ep.weights_gib < dp2.weights_gib and ep.kv_cache_tokens > dp2.kv_cache_tokens
    assert preds[("fp8", 1, 1, False)].kv_cache_tokens > one.kv_cache_tokens


def test_no_prediction_without_a_model_of_the_engine_or_the_gpu():
    assert mf.trial_fit("mock", {}, None, CONFIG, "H200") is None
    assert mf.trial_fit("vllm", BASE, None, None, "H200") is None
    assert mf.trial_fit("vllm", BASE, None, CONFIG, "unknown-gpu") is None


def test_the_check_names_each_trials_error_and_the_largest():
    checks = [mf.KvCheck(trial="a", label="bf16", predicted=1_010_000, reported=1_000_000),
              mf.KvCheck(trial="b", label="fp8", predicted=1_940_000, reported=2_000_000),
              mf.KvCheck(trial="c", label="not started", predicted=500_000)]
    assert mf.check_lines(checks) == [
        "memory-fit predictor, KV-cache tokens: largest error 3.00 % over 2 trial(s)",
        "  bf16: predicted 1,010,000, reported 1,000,000 (+1.00 %)",
        "  fp8: predicted 1,940,000, reported 2,000,000 (-3.00 %)"]
    assert mf.check_lines(checks[2:]) == []  # nothing reported: no section
