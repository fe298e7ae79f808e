"""Every profile warms up after every engine start by default (issue 45: on the lent H100 a trial's
first run after its start was 17 % low, with no warm-up before a local-search step's runs): one round
at the profile's concurrency, `warmup_requests: 0` the opt-out; on the mock engine, which has nothing
to warm, only where the profile asks. Halving rungs and local-search steps run shortened profiles
(`<name>.rung1`) on engines started again: they warm up too."""

from __future__ import annotations

import pytest

from farm.analysis.halving import build_rungs, rung_study
from farm.engines import ENGINES, get_engine
from farm.study.spec import ProfileSpec, Study


def _profile(**extra) -> ProfileSpec:
    return ProfileSpec.model_validate({"data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 4},
                                       "requests": 1000, **extra})


@pytest.mark.parametrize("extra, count", [
    ({"rate": 1000, "max_concurrency": 512}, 512),   # the seed's profiles: all 512 in flight once
    ({"rate": 1000, "max_concurrency": 8, "requests": 48}, 8),   # the smoke study's chat profile
    ({"rate": 1000, "max_concurrency": 512, "requests": 100}, 100),  # never more than the profile's own run
    ({"rate": 2.5}, 3),                               # no concurrency limit: a second of its rate
    ({}, 1),                                          # one stream
    ({"max_concurrency": 512, "warmup_requests": 256}, 256),  # the study says
    ({"max_concurrency": 512, "warmup_requests": 0}, 0),      # the opt-out
])
def test_the_default_warmup_is_one_round_at_the_profiles_concurrency(extra, count):
    assert _profile(**extra).warmup_count() == count


def _study(**profile) -> Study:
    return Study.model_validate({
        "name": "w", "models": {"m": {"name": "farm-tiny", "tokenizer": "farm:tiny"}}, "engines": {"mock": {}},
        "profiles": {"chat": {"data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 4}, "requests": 1000,
                              "rate": 1000, "max_concurrency": 512, **profile}},
        "primary_profile": "chat", "grids": {"g": {"blocks": [{"engine": "mock", "models": ["m"]}]}},
    })


@pytest.mark.parametrize("profile, warm", [({}, 111), ({"warmup_requests": 256}, 111), ({"warmup_requests": 0}, 0),
                                           ({"warmup_requests": 64}, 64)])
def test_a_rungs_shortened_profile_warms_up_as_the_profile_does(profile, warm):
    study = _study(**profile)
    rungs = build_rungs(["chat"], "chat", {"chat": 1000}, 27)
    short = rung_study(study, rungs)
    (name,) = [p for p in short.profiles if p.startswith("chat.rung1")]
    assert short.profiles[name].requests == 111
    assert short.profiles[name].warmup_count() == warm


def test_the_mock_engine_warms_up_only_where_a_profile_asks():
    # its first run after a start is no slower (farm/engines/mock.py): a default warm-up would only cost CI time
    assert {name: get_engine(name).warms_up for name in ENGINES} == {"vllm": True, "sglang": True, "mock": False}
    chat = _profile(rate=1000, max_concurrency=8, requests=48)
    assert chat.warmup_count(engine_warms_up=False) == 0 and chat.warmup_count(engine_warms_up=True) == 8
    asked = _profile(rate=1000, max_concurrency=8, requests=48, warmup_requests=5)
    assert asked.warmup_count(engine_warms_up=False) == 5
