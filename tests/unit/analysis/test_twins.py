"""A trial whose engine overrode its knob back to a measured trial's server is that trial, from the
real H200 logs of SGLang 0.5.16: `--max-running-requests 512` with the radix cache on started as
the default (79 at once, 1,392,614 KV tokens, 398 mamba slots), while 512 with the radix cache off
kept its 512 and is measured as itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.analysis.results import Status, TrialResult
from farm.analysis.twins import candidates, same_server
from farm.engines import get_engine
from farm.study.grid import expand
from farm.study.load import load_study

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "bench" / "h200" / "engine-logs"
DEFAULT = LOGS / "sglang-0.5.16-default-dummy-cold-start.log"
MRR512 = LOGS / "sglang-0.5.16-max-running-512-dummy-warm-start.log"
MRR512_NO_RADIX = LOGS / "sglang-0.5.16-max-running-512-radix-off-dummy-cold-start.log"
# 2026-12-04, the sweep's own trials: 256 and 512 with the radix cache on, ended as same_server
SAME = {"sglang_running_256": LOGS / "sglang-0.5.16-max-running-256-dummy-same-server-warm-start.log",
        "sglang_running_512": LOGS / "sglang-0.5.16-max-running-512-dummy-same-server-warm-start.log"}
sglang = get_engine("sglang")


@pytest.fixture(scope="module")
def trials():
    study = load_study(ROOT / "configs" / "h200-dummy.yaml")
    return {t.name: t for t in expand(study, "sglang")}


def reported(log: Path) -> dict:
    return dict(sglang.reported_capacity(log.read_text(errors="replace")))


def measured(trial, log: Path, status=Status.ok) -> TrialResult:
    return TrialResult(sweep_id="s", trial=trial, status=status, serve_command="", engine_reported=reported(log),
                       gpu_name="NVIDIA H200")


def test_512_with_the_radix_cache_on_is_the_default_by_its_log(trials):
    default, mrr512 = trials["engine_sglang_default"], trials["sglang_running_512"]
    found = same_server(mrr512, reported(MRR512), candidates(mrr512, [measured(default, DEFAULT)]),
                        gpu_name="NVIDIA H200")
    assert found is not None
    twin, reason = found
    assert twin.trial_id == default.id
    assert "engine_sglang_default" in reason and "max_running_requests: asked 512, got 79" in reason
    assert "KV-cache tokens 1,392,614" in reason and "mamba state slots 398" in reason


def test_a_knob_the_engine_honoured_is_measured(trials):
    # 512 with the radix cache off: SGLang kept 512; no trial of the sweep ran that server
    default, off = trials["engine_sglang_default"], trials["sglang_running_512_radix_off"]
    assert same_server(off, reported(MRR512_NO_RADIX), candidates(off, [measured(default, DEFAULT)])) is None


def test_one_limit_apart_is_another_server(trials):
    default, mrr512 = trials["engine_sglang_default"], trials["sglang_running_512"]
    mine = reported(MRR512) | {"kv_cache_tokens": 1_392_613}
    assert same_server(mrr512, mine, candidates(mrr512, [measured(default, DEFAULT)])) is None


def test_another_flag_or_gpu_or_an_unmeasured_twin_is_not_a_twin(trials):
    default, fp8, mrr512 = trials["engine_sglang_default"], trials["sglang_quant_fp8"], trials["sglang_running_512"]
    # the FP8 trial differs in more than the overridden knob (and would state other limits)
    fp8_as_default_log = measured(fp8, DEFAULT)
    assert same_server(mrr512, reported(MRR512), candidates(mrr512, [fp8_as_default_log])) is None
    # a default that failed is no measurement to stand for another trial
    failed = measured(default, DEFAULT, status=Status.engine_crashed)
    assert candidates(mrr512, [failed]) == []
    # measured on another GPU model
    other = measured(default, DEFAULT).model_copy(update={"gpu_name": "NVIDIA A100-SXM4-80GB"})
    assert same_server(mrr512, reported(MRR512), candidates(mrr512, [other]), gpu_name="NVIDIA H200") is None
    # a default that measured fewer profiles than this trial would
    fewer = measured(default.model_copy(update={"profiles": default.profiles[:1]}), DEFAULT)
    assert candidates(mrr512, [fewer]) == []


def test_a_twin_measured_on_another_machine_is_found_by_what_its_model_is(trials):
    # the H200's default ran from /tmp/farm-h200/src/.models/...; this checkout's path is another
    default, mrr512 = trials["engine_sglang_default"], trials["sglang_running_512"]
    there = default.model_copy(update={"model": "/tmp/farm-h200/src/.models/qwen3.5-35b-a3b-shape"})
    assert there.model != mrr512.model
    found = same_server(mrr512, reported(MRR512), candidates(mrr512, [measured(there, DEFAULT)]))
    assert found is not None and found[0].label == "engine_sglang_default"
    other_model = default.model_copy(update={"model": "/elsewhere/another-model"})
    assert candidates(mrr512, [measured(other_model, DEFAULT)]) == []


@pytest.mark.parametrize("name", sorted(SAME))
def test_the_trials_that_ended_as_the_default_on_the_h200_are_the_default_by_their_own_logs(trials, name):
    default, trial = trials["engine_sglang_default"], trials[name]
    asked = trial.knobs["max_running_requests"]
    twin, reason = same_server(trial, reported(SAME[name]), candidates(trial, [measured(default, DEFAULT)]),
                               gpu_name="NVIDIA H200")
    assert twin.label == "engine_sglang_default" and f"asked {asked}, got 79" in reason
