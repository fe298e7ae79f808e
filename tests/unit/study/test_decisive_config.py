"""The decisive sitting's study (configs/decisive-dummy.yaml, issue 45): the seed's five measurable
vLLM configurations on the deciding profile. On an H100 three of them cannot start as the seed wrote
them, so the study's `decisive_h100` grid caps each at farm's repair of it; those caps are written
in the file, and this checks them against what the memory-fit model predicts today for the grid
`decisive` on an H100 (with the real model shape), so a change to the model cannot leave the
sitting racing a cap farm would no longer choose."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from sweeptools import shape_config

from farm.run.memory import predictions
from farm.study.grid import expand
from farm.study.load import load_study

REPO = Path(__file__).resolve().parents[3]


def _study(tmp_path, gpu: str):
    model = tmp_path / "models" / "qwen3.5-35b-a3b-shape"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(shape_config()))
    seed = yaml.safe_load((REPO / "configs" / "h200-dummy.yaml").read_text())
    seed["models"]["bf16"]["name"] = str(model)
    seed["accelerator_type"] = gpu
    (tmp_path / "h200-dummy.yaml").write_text(yaml.safe_dump(seed, sort_keys=False))
    (tmp_path / "decisive.yaml").write_text((REPO / "configs" / "decisive-dummy.yaml").read_text())
    return load_study(tmp_path / "decisive.yaml")


def test_the_h100_grid_caps_each_trial_at_farms_repair_and_the_rest_as_the_seed(tmp_path):
    study = _study(tmp_path, "H100")
    assert study.deciding_metric == "steady_tps" and study.repeats == "auto"
    assert study.profiles[study.primary_profile].warmup_count() == 1024
    seed, h100 = expand(study, "decisive"), expand(study, "decisive_h100")
    assert [t.name for t in seed] == [t.name for t in h100] == [
        "engine_vllm_default", "step1_quant_fp8", "step2_prefix_cache", "step3_performance_mode", "step4_kv_cache_fp8"]
    fits = predictions(study, seed)
    repairs = {t.name: fits[t.id].repair_running_requests for t in seed if not fits[t.id].fits}
    assert set(repairs) == {"engine_vllm_default", "step3_performance_mode", "step4_kv_cache_fp8"}
    caps = {t.name: t.knobs.get("max_running_requests") for t in h100}
    assert {n: caps[n] for n in repairs} == repairs
    # the two that start as written are the seed's own trials, unchanged
    assert {t.id for t in h100 if caps[t.name] is None} == {t.id for t in seed if t.name not in repairs}
    # and every capped one is predicted to start
    assert all(f.fits for f in predictions(study, h100).values())


def test_on_an_h200_every_seed_configuration_starts_as_written(tmp_path):
    study = _study(tmp_path, "H200")
    assert all(f.fits for f in predictions(study, expand(study, "decisive")).values())
