"""Weight-free models: `weights: dummy` reaches the engine as its dummy load format, the trial is
another server than the same flags with real weights, every record says so, and a configuration
whose throughput depends on what the model outputs (speculative decoding) is never recommended
from dummy-weight runs."""

from __future__ import annotations

import copy

import pytest

from farm.engines import get_engine
from farm.errors import UserError
from farm.study.grid import expand
from farm.analysis.records import Provenance, results_from_data, results_to_data
from farm.report import render, report_for
from farm.study.spec import Study


def _study(weights: str = "dummy", engines=("vllm", "sglang")) -> Study:
    data = {
        "name": "dummy-test",
        "models": {"m": {"name": "/models/shape", "weights": weights}},
        "engines": {e: {"launcher": [e]} for e in engines},
        "profiles": {"p": {"data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 4}, "requests": 4}},
        "primary_profile": "p",
        "grids": {"g": {"blocks": [{"engine": e, "models": ["m"]} for e in engines]
                        + [{"engine": "vllm", "models": ["m"], "knobs": {"speculative": {"method": "mtp", "num_tokens": 4}}}]}},
    }
    return Study.model_validate(data)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_dummy_weights_render_the_engines_load_format(engine):
    study = _study()
    trial = next(t for t in expand(study, "g") if t.engine == engine)
    assert trial.weights == "dummy"
    argv = get_engine(engine).command(study.engines[engine], trial, port=8000)
    assert "--load-format=dummy" in argv
    # what a user pastes says so too: it is the command that was measured
    assert "--load-format=dummy" in get_engine(engine).serve_command(study.engines[engine], trial)


def test_real_weights_get_no_load_format_and_keep_their_id():
    dummy = {t.engine: t for t in expand(_study("dummy"), "g") if not t.flags}
    real = {t.engine: t for t in expand(_study("real"), "g") if not t.flags}
    for engine in ("vllm", "sglang"):
        argv = get_engine(engine).command(_study("real").engines[engine], real[engine], port=8000)
        assert not any(a.startswith("--load-format") for a in argv)
        assert real[engine].id != dummy[engine].id  # another server: the same flags measure another thing


def test_an_explicit_load_format_is_not_given_twice():
    study = _study(engines=("vllm",))
    study.engines["vllm"].flags["load-format"] = "dummy"
    trial = expand(study, "g")[0]
    argv = get_engine("vllm").command(study.engines["vllm"], trial, port=8000)
    assert sum(a.startswith("--load-format") for a in argv) == 1


def test_weights_is_validated():
    with pytest.raises(Exception) as exc:
        _study("random")
    assert "weights" in str(exc.value)


def _results(dummy: bool, spec_tps: float = 9000.0) -> dict:
    prov = {"weights": "dummy" if dummy else "real", "engine_version": "0.20.2", "gpu": "NVIDIA H200",
            "client_version": "guidellm 0.8.1", "engine_start_s": 241.0, "engine_start_cold": True}
    base = {"engine": "vllm", "model": "/models/shape", "profile": "p"}
    metrics = lambda tps: {"successful_requests": 100.0, "total_tps": tps, "duration_s": 10.0,  # noqa: E731
                           "total_input_tokens": tps * 5, "total_output_tokens": tps * 5}
    return {
        "profiles": {"p": {"total_requests": 100}},
        "primary_profile": "p",
        "runs": [
            {**base, "id": "engine_vllm_default", "flags": ["--max-model-len=32768"], "metrics": metrics(5000.0),
             "provenance": dict(prov)},
            {**base, "id": "mtp", "flags": ["--max-model-len=32768", '--speculative-config={"method":"mtp"}'],
             "metrics": metrics(spec_tps), "provenance": dict(prov)},
        ],
    }


def test_speculative_decoding_on_dummy_weights_is_not_recommended(study):
    results = results_from_data(_results(dummy=True), "h200.json")
    report = report_for(results, study.model_copy(update={"primary_profile": "p"}), prefer_results_profile=True)
    assert report.selection.recommended.name == "engine_vllm_default"
    text = render(report, "markdown")
    assert "dummy weights with --speculative-config" in text
    assert "Dummy weights: the real architecture with random weights" in text


def test_speculative_decoding_on_real_weights_can_win(study):
    results = results_from_data(_results(dummy=False), "real.json")
    report = report_for(results, study, prefer_results_profile=True)
    assert report.selection.recommended.name == "mtp"


def test_provenance_survives_the_results_file():
    data = _results(dummy=True)
    back = results_to_data(results_from_data(copy.deepcopy(data), "a.json"))
    assert back["runs"][0]["provenance"] == data["runs"][0]["provenance"]
    again = results_from_data(back, "b.json")
    assert again.records[0].provenance == Provenance(**data["runs"][0]["provenance"])


def test_a_provenance_of_the_wrong_type_names_its_key():
    data = _results(dummy=True)
    data["runs"][1]["provenance"]["engine_start_s"] = "fast"
    with pytest.raises(UserError) as exc:
        results_from_data(data, "bad.json")
    assert "runs[1].provenance.engine_start_s" in str(exc.value)
