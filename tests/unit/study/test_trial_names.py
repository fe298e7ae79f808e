"""Readable trial names: a user reads `ttft-ms=50 itl-ms=10` where the hash `mock-dd59a71a` said nothing."""

from __future__ import annotations

import pytest

from farm.errors import SpecError
from farm.study.grid import expand, select_trials
from farm.study.load import load_study
from farm.study.names import readable_names
from farm.study.spec import Study


def _study(*blocks) -> Study:
    return Study.model_validate({
        "name": "t", "models": {"m": "org/model", "n": "org/other"},
        "engines": {"mock": {"flags": {"ttft-ms": 10}}},
        "profiles": {"p": {"data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 8}, "requests": 4}},
        "primary_profile": "p",
        "grids": {"g": {"blocks": list(blocks)}},
    })


def test_the_smoke_grid_names_its_trials_by_the_flags_it_varies():
    trials = expand(load_study(), "smoke")
    assert [t.name for t in trials] == ["ttft-ms=50 itl-ms=10", "ttft-ms=50 itl-ms=40",
                                        "ttft-ms=200 itl-ms=10", "ttft-ms=200 itl-ms=40"]
    assert all(t.id.startswith("mock-") for t in trials)  # the id stays the hash


def test_the_name_leaves_out_what_every_trial_shares_and_the_id_ignores_it():
    trials = expand(_study({"engine": "mock", "models": ["m"], "flags": {"itl-ms": 5}, "axes": {"admission-limit": [1, 3]}}), "g")
    assert [t.name for t in trials] == ["admission-limit=1", "admission-limit=3"]
    unnamed = expand(_study({"engine": "mock", "models": ["m"], "flags": {"itl-ms": 5, "admission-limit": 1}}), "g")
    assert unnamed[0].id == trials[0].id  # the name is only shown: same server, same id


def test_a_block_name_wins_and_a_lone_trial_keeps_its_id():
    trials = expand(_study({"engine": "mock", "models": ["m"], "name": "baseline"},
                           {"engine": "mock", "models": ["m", "n"], "flags": {"itl-ms": 5}}), "g")
    assert [t.name for t in trials] == ["baseline", "model=m itl-ms=5", "model=n itl-ms=5"]
    lone = expand(_study({"engine": "mock", "models": ["m"]}), "g")
    assert lone[0].name is None and lone[0].label == lone[0].id


def test_a_trial_without_a_setting_the_others_have_says_default():
    trials = expand(_study({"engine": "mock", "models": ["m"]}, {"engine": "mock", "models": ["m"], "flags": {"itl-ms": 5}}), "g")
    assert [t.name for t in trials] == ["itl-ms=default", "itl-ms=5"]


def test_a_readable_name_selects_its_trial_like_the_id():
    trials = expand(load_study(), "smoke")
    assert select_trials(trials, ["ttft-ms=200 itl-ms=40"], key="--trial") == {trials[3].id}
    with pytest.raises(SpecError, match="ttft-ms=50 itl-ms=10"):  # the known trials are listed by name
        select_trials(trials, ["nope"], key="--trial")


def test_values_read_as_a_study_writes_them_and_names_stay_unique():
    names = readable_names([{"a": True, "b": {"x": 1}}, {"a": False, "b": {"x": 2}}], [None, None])
    assert names == ['a=true b={"x":1}', 'a=false b={"x":2}']
    # Two trials whose shown settings collide keep their ids rather than one name for two servers.
    assert readable_names([{"a": 1}, {"a": "1"}, {"a": 2}], [None, None, None]) == [None, None, "a=2"]


def test_an_axis_value_null_reads_default_not_pythons_none():
    # the vLLM CPU study's axes `kv-cache-dtype: [null, fp8]`: null is the engine's default
    from conftest import REPO

    names = {t.name for t in expand(load_study(REPO / "configs/tiny-vllm-cpu.yaml"), "cpu")}
    assert "max-num-seqs=4 kv-cache-dtype=default performance-mode=default prefix_caching=true" in names
    assert not any("None" in n for n in names)
    # null and an absent setting are the same server setting, so they do not make a name differ
    assert readable_names([{"a": None, "b": 1}, {"b": 2}], [None, None]) == ["b=1", "b=2"]
