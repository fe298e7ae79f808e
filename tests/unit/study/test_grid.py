from __future__ import annotations

import pytest

from farm.errors import SpecError
from farm.study.grid import expand
from farm.study.load import load_study
from farm.study.spec import Study


def _study(**grid) -> Study:
    return Study.model_validate({
        "name": "t", "models": {"m": "org/model"},
        "engines": {"mock": {"flags": {"ttft-ms": 10}}},
        "profiles": {"p": {"data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 8}, "requests": 4}},
        "primary_profile": "p",
        "grids": {"g": {"blocks": [{"engine": "mock", "models": ["m"], **grid}]}},
    })


def test_cartesian_product_and_exclude():
    study = _study(axes={"itl-ms": [1, 2, 3], "max-concurrent-requests": [4, 8]},
                   exclude=[{"itl-ms": 3, "max-concurrent-requests": 8}])
    trials = expand(study, "g")
    assert len(trials) == 5
    combos = {(t.flags["itl-ms"], t.flags["max-concurrent-requests"]) for t in trials}
    assert (3, 8) not in combos and (3, 4) in combos
    assert all(t.required_flags == {"ttft-ms": 10} for t in trials)


def test_ids_are_stable_and_independent_of_flag_order():
    a = expand(_study(flags={"a": 1, "b": 2}), "g")[0]
    b = expand(_study(flags={"b": 2, "a": 1}), "g")[0]
    assert a.id == b.id
    assert a.id != expand(_study(flags={"a": 1, "b": 3}), "g")[0].id


def test_duplicate_combinations_are_one_trial():
    study = _study(axes={"x": [1, 1]})
    assert len(expand(study, "g")) == 1


def test_everything_excluded_is_an_error():
    with pytest.raises(SpecError, match="no trials"):
        expand(_study(axes={"x": [1]}, exclude=[{"x": 1}]), "g")


def test_default_study_grids():
    study = load_study()
    smoke = expand(study, "smoke")
    assert len(smoke) >= 4 and {t.engine for t in smoke} == {"mock"}
    assert all(t.gpus == 0 for t in smoke)
    seed = expand(study, "seed")
    assert [t.name for t in seed][:2] == ["engine_vllm_default", "engine_sglang_default"]
    assert all(t.gpus >= 1 for t in seed)
    full = expand(study, "full")
    assert {t.engine for t in full} == {"vllm", "sglang"}
    assert {t.model for t in full} == {"Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.5-35B-A3B-FP8"}


def test_the_mock_grids_are_not_named_after_the_h200_study_that_includes_them():
    study = load_study()
    for grid in ("smoke", "smoke_capacity"):
        assert study.grid_experiment(grid) == "farm-demo"
    assert study.grid_experiment("seed") == "qwen3.5-35b-a3b"
