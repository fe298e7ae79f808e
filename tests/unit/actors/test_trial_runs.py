"""What one trial runs on its engine: warm-up runs before the measured ones (`warmup_requests`),
more runs of some profiles for some blocks (`profile_repeats`), the engine's environment taken
from the node's (`${NAME}`), and the provenance each result carries. A real guidellm against a
real mock-server engine, run by the actor's runner."""

from __future__ import annotations

import json

import pytest

from actors.bench import TrialJob, TrialRunner
from farm.errors import SpecError
from farm.study.grid import expand
from actors.proc import EngineEnvError, expand_env
from farm.analysis.records import records_from_trials
from farm.analysis.results import Status
from farm.study.spec import Study


def _study(**block) -> Study:
    return Study.model_validate({
        "name": "runs-test", "models": {"tiny": {"name": "farm-tiny", "tokenizer": "farm:tiny"}},
        "engines": {"mock": {"flags": {"ttft-ms": 5, "itl-ms": 1}, "ready_timeout_s": 60,
                             "env": {"FARM_TEST_SEEN": "${FARM_TEST_NODE_VALUE}/x"}}},
        "profiles": {
            "a": {"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8}, "requests": 8,
                  "rate": 1000, "max_concurrency": 4, "max_seconds": 60, "warmup_requests": 5},
            "b": {"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8, "prompt_tokens_stdev": 4,
                           "prompt_tokens_min": 8, "prompt_tokens_max": 32}, "requests": 8,
                  "rate": 1000, "max_concurrency": 4, "max_seconds": 60},
        },
        "primary_profile": "a",
        "grids": {"one": {"blocks": [{"engine": "mock", "models": ["tiny"], **block}]}},
    })


@pytest.mark.slow
def test_warmup_and_profile_repeats_on_a_real_engine(tmp_path, monkeypatch):
    monkeypatch.setenv("FARM_TEST_NODE_VALUE", "node-path")
    monkeypatch.setenv("FARM_CACHE_DIR", str(tmp_path / "cache"))
    study = _study(profile_repeats={"b": 2})
    trial = expand(study, "one")[0]
    job = TrialJob(sweep_id="t", trial=trial, engine_spec=study.engines["mock"], profiles=study.profiles,
                   workdir=str(tmp_path / "runs"))
    result = TrialRunner(job).run()
    assert result.status == Status.ok, result.reason
    # a warm-up of a (its 5 requests, not a measured run; b asks for none, and the mock engine has
    # nothing a default warm-up would warm), then a once and b twice
    assert [(w.profile, w.requests, w.ok) for w in result.warmup_runs] == [("a", 5, True)]
    assert sorted((r.profile, r.repeat) for r in result.runs) == [("a", 0), ("b", 0), ("b", 1)]
    trial_dir = tmp_path / "runs" / "t" / trial.id / "attempt-1"
    warm = json.loads((trial_dir / "a-warmup.scenario.json").read_text())
    assert {"kind": "max_requests", "count": 5} in warm["constraints"]
    spread = json.loads((trial_dir / "b-r0.scenario.json").read_text())["data"][0]
    assert (spread["prompt_tokens_stdev"], spread["prompt_tokens_min"], spread["prompt_tokens_max"]) == (4, 8, 32)
    assert result.guidellm_version and result.guidellm_version.startswith("0.")
    records = records_from_trials([result], study, grid="one")
    prov = records.records[0].provenance
    assert prov.client_version == f"guidellm {result.guidellm_version}" and prov.weights == "real"
    # the machine it ran on, and its GPUs "not measured" with the reason (a CPU engine holds none), never zeros
    assert result.machine.gpu_not_read == "no GPU: the trial holds none" and result.machine.kernel
    assert prov.machine_key == result.machine.key and prov.machine == result.machine
    # its host's speed beside the fingerprint, the GPU's "not measured" with the same reason
    assert result.machine.host_sha256_mib_s > 0 and result.machine.host_copy_gib_s > 0
    assert result.machine.gpu_matmul_bf16_tflops is None
    assert result.machine.gpu_bench_not_measured == "no GPU: the trial holds none"
    assert all(r.gpu.measured is False and r.gpu.reason == "no GPU: the trial holds none" and r.gpu.sm_clock_mhz is None
               for r in result.runs)
    assert prov.gpu_samples == result.runs[0].gpu
    assert prov.engine_start_s == result.engine_reported["ready_s"] and prov.started_at.endswith("+00:00")


@pytest.mark.slow
def test_a_later_pass_ignores_profile_repeats(tmp_path, monkeypatch):
    monkeypatch.setenv("FARM_TEST_NODE_VALUE", "v")
    study = _study(profile_repeats={"b": 3})
    study.profiles["a"].warmup_requests = 0
    trial = expand(study, "one")[0]
    job = TrialJob(sweep_id="t", trial=trial, engine_spec=study.engines["mock"], profiles=study.profiles,
                   workdir=str(tmp_path / "runs"), first_pass=False)
    result = TrialRunner(job).run()
    assert result.status == Status.ok, result.reason
    assert sorted((r.profile, r.repeat) for r in result.runs) == [("a", 0), ("b", 0)]


@pytest.mark.slow
@pytest.mark.parametrize("search_capacity, searched", [(None, False), (True, True)])
def test_a_later_pass_searches_capacity_only_when_it_brings_the_profile_first(tmp_path, monkeypatch, search_capacity,
                                                                              searched):
    # A --repeats auto pass adds no load to search (None: first pass only); a local search's final
    # comparison, or halving's last rung, is a later pass that brings the capacity profile first.
    from farm.study.spec import ProfileSpec

    monkeypatch.setenv("FARM_TEST_NODE_VALUE", "v")
    study = _study()
    study.profiles["a"].warmup_requests = 0
    cap = ProfileSpec.model_validate({"kind": "capacity", "data": {"kind": "synthetic", "prompt_tokens": 16,
                                                                    "output_tokens": 8},
                                      "requests": 4, "max_seconds": 60, "slo": {"ttft_p95_ms_max": 5000},
                                      "capacity": {"over": "concurrency", "ladder": [1], "max_runs": 1}})
    trial = expand(study, "one")[0].model_copy(update={"profiles": ["a", "cap"]})
    job = TrialJob(sweep_id="t", trial=trial, engine_spec=study.engines["mock"],
                   profiles={"a": study.profiles["a"], "cap": cap}, workdir=str(tmp_path / "runs"), first_pass=False,
                   search_capacity=search_capacity)
    result = TrialRunner(job).run()
    assert result.status == Status.ok, result.reason
    assert [(r.profile, r.load) for r in result.runs if r.profile == "cap"] == ([("cap", 1)] if searched else [])


def test_an_engine_variable_the_node_lacks_fails_the_trial_before_the_engine_starts(tmp_path, monkeypatch):
    monkeypatch.delenv("FARM_TEST_NODE_VALUE", raising=False)
    study = _study()
    trial = expand(study, "one")[0]
    job = TrialJob(sweep_id="t", trial=trial, engine_spec=study.engines["mock"], profiles=study.profiles,
                   workdir=str(tmp_path / "runs"))
    result = TrialRunner(job).run()
    assert result.status == Status.engine_failed_to_start
    assert "${FARM_TEST_NODE_VALUE} is not set on this node" in result.reason and result.engine_pid is None


def test_expand_env():
    assert expand_env({"PYTHONPATH": "${A}:${B}", "X": "plain"}, {"A": "/a", "B": "/b"}) == \
        {"PYTHONPATH": "/a:/b", "X": "plain"}
    with pytest.raises(EngineEnvError, match=r"\$\{B\} is not set"):
        expand_env({"P": "${A}:${B}"}, {"A": "/a"})


@pytest.mark.parametrize("block, key", [
    ({"profile_repeats": {"nope": 2}}, "grids.one.blocks[0].profile_repeats.nope"),
    ({"profile_repeats": {"a": 0}}, "grids.one.blocks[0].profile_repeats"),
])
def test_profile_repeats_errors_name_their_key(tmp_path, block, key):
    import yaml

    from farm.study.load import load_study

    data = _study().model_dump(mode="json", exclude_defaults=True)
    data["grids"]["one"]["blocks"][0].update(block)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError) as exc:
        load_study(path)
    assert key in str(exc.value)


def test_a_spread_outside_its_bounds_is_refused():
    with pytest.raises(Exception, match="outside"):
        Study.model_validate({**_study().model_dump(mode="json", exclude_defaults=True), "profiles": {
            "a": {"data": {"kind": "synthetic", "prompt_tokens": 100, "output_tokens": 8, "prompt_tokens_max": 50},
                  "requests": 1}}})
