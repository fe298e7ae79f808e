"""Which trials the quality gate checks and against what (farm/analysis/quality_gate.py), on the
real H200 study (configs/h200-dummy.yaml: FP8 weights, FP8 KV cache, speculative decoding, all on
dummy weights) and on small studies built here."""

from __future__ import annotations

import pytest
import yaml

from conftest import REPO
from farm.analysis.quality import PairedCounts, verdict_from_counts
from farm.analysis.quality_gate import (DUMMY, NO_REFERENCE, NOT_GATED, NOT_YET, find_reference, numerics_changes,
                                        on_dummy_weights, quality_statuses)
from farm.study.grid import expand
from farm.study.load import load_study, validate_study


@pytest.fixture(scope="module")
def h200():
    return load_study(REPO / "configs" / "h200-dummy.yaml")


def _by_name(statuses):
    return {s.name: s for s in statuses}


def test_the_seed_grid_gates_every_numerics_step_against_the_engine_default(h200):
    trials = expand(h200, "seed")
    default = next(t for t in trials if t.name == "engine_vllm_default")
    st = _by_name(quality_statuses(trials, h200))
    assert not st["engine_vllm_default"].gated and st["engine_vllm_default"].status == NOT_GATED
    assert st["step1_quant_fp8"].numerics == {"quantization": "fp8"}
    assert st["step4_kv_cache_fp8"].numerics == {"quantization": "fp8", "kv-cache-dtype": "fp8"}
    assert set(st["step_spec_decoding_mtp4"].numerics) == {"quantization", "speculative-config"}
    # Differs only in numerics knobs: the grid's own twin. The others differ in speed flags too.
    for name in ("step1_quant_fp8", "step_spec_decoding_mtp4"):
        assert (st[name].reference.trial, st[name].reference.found, st[name].reference.differs_in) == \
            (default.id, "grid", [])
    assert st["step2_prefix_cache"].reference.found == "engine default"
    assert st["step2_prefix_cache"].reference.differs_in == ["enable-prefix-caching"]
    assert st["step4_kv_cache_fp8"].reference.trial == default.id
    assert st["step4_kv_cache_fp8"].reference.differs_in == ["enable-prefix-caching", "performance-mode"]


def test_a_weight_free_study_never_passes_a_gated_trial(h200):
    for grid in h200.grids:
        trials = expand(h200, grid)
        # Even a verdict handed in for every trial does not make a dummy-weights trial checked.
        fine = verdict_from_counts(PairedCounts(both=240, only_gated=0, only_reference=0, neither=60), margin=0.02)
        statuses = quality_statuses(trials, h200, {t.id: fine for t in trials})
        gated = [s for s in statuses if s.gated]
        assert gated, grid
        assert all(s.status == DUMMY and s.dummy_weights and s.verdict is None for s in gated), grid
        assert all(s.why.startswith("quality not checked: dummy weights") for s in gated)
        assert not any("pass" in s.status for s in statuses)
        assert {s.status for s in statuses if not s.gated} <= {NOT_GATED}


def test_the_sglang_grid_gates_fp8_and_not_its_running_limits(h200):
    st = _by_name(quality_statuses(expand(h200, "sglang"), h200))
    assert {n for n, s in st.items() if s.gated} == {"sglang_quant_fp8", "sglang_fp8_radix_off", "sglang_fp8_kv_cache_fp8"}
    assert st["sglang_fp8_kv_cache_fp8"].numerics == {"quantization": "fp8", "kv-cache-dtype": "fp8_e4m3"}
    assert st["sglang_fp8_kv_cache_fp8"].reference.name == "engine_sglang_default"
    # One flag from the default and one from a running-limit trial: the engine default wins the tie.
    assert st["sglang_fp8_radix_off"].reference.name == "engine_sglang_default"


def test_the_full_grid_finds_each_twin_and_otherwise_the_nearest(h200):
    trials = expand(h200, "full")
    by_id = {t.id: t for t in trials}
    statuses = quality_statuses(trials, h200)
    twins = [s for s in statuses if s.gated and s.reference.found == "grid"]
    assert len(twins) == 28  # the first block: 32 combinations, 4 of them with no numerics knob
    for s in twins:
        trial, ref = by_id[s.trial], by_id[s.reference.trial]
        assert numerics_changes(ref, h200) == {}
        assert {k: v for k, v in trial.flags.items() if k not in s.numerics} == ref.flags
    for s in statuses:
        if s.gated and s.reference.found == "nearest":
            assert s.reference.differs_in and numerics_changes(by_id[s.reference.trial], h200) == {}


def test_real_weights_take_the_verdict_handed_in(h200):
    trials = [t.model_copy(update={"weights": "real"}) for t in expand(h200, "seed")]
    step1 = next(t for t in trials if t.name == "step1_quant_fp8")
    worse = verdict_from_counts(PairedCounts(both=210, only_gated=5, only_reference=30, neither=55), margin=0.02)
    st = _by_name(quality_statuses(trials, h200, {step1.id: worse}))
    assert st["step1_quant_fp8"].status == "worse" and st["step1_quant_fp8"].refused
    assert "against engine_vllm_default (grid)" in st["step1_quant_fp8"].why
    assert st["step4_kv_cache_fp8"].status == NOT_YET and not st["step4_kv_cache_fp8"].refused
    assert "differs in enable-prefix-caching, performance-mode too" in st["step4_kv_cache_fp8"].why


def test_dummy_weights_given_as_a_flag_count_too(h200):
    trial = next(t for t in expand(h200, "seed") if t.name == "step1_quant_fp8")
    real = trial.model_copy(update={"weights": "real"})
    assert on_dummy_weights(trial) and not on_dummy_weights(real)
    assert on_dummy_weights(real.model_copy(update={"flags": {**real.flags, "load-format": "dummy"}}))


STUDY = """\
name: variants
primary_profile: p
baseline: {baseline}
models:
  bf16: {{name: org/model}}
  fp8: {{name: org/model-FP8, quantization: fp8, variant_of: bf16}}
  other: {{name: org/other}}
engines: {{vllm: {{flags: {{dtype: bfloat16}}}}}}
profiles: {{p: {{data: {{kind: synthetic, prompt_tokens: 8, output_tokens: 4}}, requests: 4}}}}
grids:
  g:
    blocks:
      - {{name: base, engine: vllm, models: [bf16]}}
      - {{name: base_seqs, engine: vllm, models: [bf16], flags: {{max-num-seqs: 64}}}}
      - {{name: fp8_checkpoint, engine: vllm, models: [bf16], knobs: {{quantization: fp8}}}}
      - {{name: kv_fp8_seqs_128, engine: vllm, models: [bf16], knobs: {{kv_cache_dtype: fp8}}, flags: {{max-num-seqs: 128}}}}
      - {{name: other_kv_fp8, engine: vllm, models: [other], knobs: {{kv_cache_dtype: fp8}}}}
"""


def _variants(baseline: str = "null"):
    study = validate_study(yaml.safe_load(STUDY.format(baseline=baseline)), "s.yaml")
    return study, expand(study, "g")


def test_a_pre_quantized_variant_is_a_numerics_change_against_its_family():
    study, trials = _variants()
    st = _by_name(quality_statuses(trials, study))
    # The quantization knob picked the FP8 checkpoint: no flag, but the model is another variant.
    assert st["fp8_checkpoint"].numerics == {"model": "fp8 (quantization: fp8)"}
    assert st["fp8_checkpoint"].reference.name == "base" and st["fp8_checkpoint"].reference.found == "grid"
    # The engine's own required flags (dtype for every trial) gate nothing.
    assert not st["base"].gated and not st["base_seqs"].gated


def test_the_study_baseline_comes_before_the_nearest_and_another_model_is_no_reference():
    study, trials = _variants()
    st = _by_name(quality_statuses(trials, study))
    assert (st["kv_fp8_seqs_128"].reference.name, st["kv_fp8_seqs_128"].reference.found) == ("base", "engine default")
    study, trials = _variants(baseline="base_seqs")
    kv = next(t for t in trials if t.name == "kv_fp8_seqs_128")
    ref = find_reference(kv, trials, study)
    assert (ref.name, ref.found, ref.differs_in) == ("base_seqs", "baseline", ["max-num-seqs"])
    # No trial of model 'other' without the FP8 KV cache: nothing to compare with.
    other = _by_name(quality_statuses(trials, study))["other_kv_fp8"]
    assert other.status == NO_REFERENCE and other.reference is None
    assert "no trial of vllm on other" in other.why
