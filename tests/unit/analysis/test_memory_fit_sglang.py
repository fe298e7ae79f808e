"""The memory-fit predictor for SGLang (a static budget: weights and cache pools only, the pools split
between the hybrid model's mamba-state slots and the KV cache) against what SGLang 0.5.16 printed
on the lent H200 for Qwen3.5-35B-A3B's shape (bench/h200/engine-logs/sglang-0.5.16-*), each start
predicted from its exact command line; and `farm sweep --dry-run` showing it for the SGLang grid.

Errors on the H200 (predicted / reported - 1, KV-cache tokens): default +0.13 %, 512 asked
+0.13 %, 512 with the radix cache off +0.17 %, FP8 +0.05 %; the mamba slots and the requests at
once are SGLang's to the slot."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from farm.analysis import memory_fit as mf
from farm.engines import get_engine
from tests.conftest import run_farm
from tests.shape_config import H200_LOGS, REPO, SGLANG_STARTS, command_flags, shape_model_config

sglang = get_engine("sglang")
TOLERANCE = 0.01  # KV-cache tokens, as for vLLM (tests/unit/analysis/test_memory_fit.py)


@pytest.fixture(scope="module")
def config() -> dict:
    return shape_model_config()


def start(name: str) -> tuple[dict, dict]:
    """A start's flags and what SGLang reported (the adapter's own reading of its log)."""
    stem = f"sglang-0.5.16-{name}"
    return (command_flags(H200_LOGS / f"{stem}.command.txt"),
            sglang.reported_capacity((H200_LOGS / f"{stem}.log").read_text()))


def fit(flags: dict, config: dict, gpu: str = "H200") -> mf.FitPrediction:
    return mf.trial_fit("sglang", flags, None, config, gpu)


@pytest.mark.parametrize("name", SGLANG_STARTS)
def test_each_h200_start_predicted_from_its_command(name, config):
    flags, reported = start(name)
    p = fit(flags, config)
    assert p.fits
    err = mf.prediction_error(p.kv_cache_tokens, reported["kv_cache_tokens"])
    assert abs(err) < TOLERANCE, f"{name}: predicted {p.kv_cache_tokens:,}, reported {reported['kv_cache_tokens']:,}"
    assert abs(p.state_slots - reported["mamba_cache_size"]) <= 1
    # The radix-off start was stopped before its summary line; with one slot per request its cap
    # is its 512 slots.
    running = reported.get("max_running_requests") or reported["mamba_cache_size"]
    assert p.max_running_requests == running
    assert p.kv_cache_gib == pytest.approx(reported["kv_cache_memory_gib"], abs=0.1)


def test_512_asked_with_the_radix_cache_on_runs_what_its_slots_allow(config):
    flags, reported = start("max-running-512-dummy-warm-start")
    assert reported["max_running_requests_requested"] == 512
    assert fit(flags, config).max_running_requests == reported["max_running_requests"] < 512
    default = fit(start("default-dummy-cold-start")[0], config)
    assert fit(flags, config).kv_cache_tokens == default.kv_cache_tokens


def test_the_radix_cache_off_buys_requests_at_once_with_kv_cache(config):
    on = fit(start("max-running-512-dummy-warm-start")[0], config)
    off = fit(start("max-running-512-radix-off-dummy-start-stopped")[0], config)
    assert off.max_running_requests == 512 > on.max_running_requests
    assert off.state_slots > on.state_slots and off.kv_cache_tokens < on.kv_cache_tokens


def test_fp8_weights_leave_more_to_both_pools(config):
    bf16, fp8 = fit(start("default-dummy-cold-start")[0], config), fit(start("fp8-dummy-warm-start")[0], config)
    assert fp8.weights_gib < bf16.weights_gib
    assert fp8.state_slots > bf16.state_slots and fp8.kv_cache_tokens > bf16.kv_cache_tokens
    assert fp8.max_running_requests > bf16.max_running_requests


def test_an_fp8_kv_cache_holds_twice_the_tokens(config):
    flags = start("fp8-dummy-warm-start")[0]
    auto, fp8_kv = fit(flags, config), fit({**flags, "kv-cache-dtype": "fp8_e4m3"}, config)
    assert fp8_kv.state_slots == auto.state_slots
    assert fp8_kv.kv_cache_tokens == pytest.approx(2 * auto.kv_cache_tokens, rel=0.001)


def test_the_static_fraction_decides_the_pools(config):
    flags = start("default-dummy-cold-start")[0]
    default = fit(flags, config)
    more = fit({**flags, "mem-fraction-static": 0.9}, config)
    assert more.usable_gib > default.usable_gib and more.kv_cache_tokens > default.kv_cache_tokens
    # A larger prefill chunk makes SGLang reserve more for activations outside the static budget.
    assert fit({**flags, "chunked-prefill-size": 16384}, config).kv_cache_tokens < default.kv_cache_tokens


def test_what_cannot_start_is_pruned_with_the_reason(config):
    flags = start("default-dummy-cold-start")[0]
    small = fit({**flags, "mem-fraction-static": 0.4}, config)  # 56 GiB for 65.7 GiB of weights
    assert not small.fits and "static budget" in small.reason
    # 4096 state slots of 61 MiB each (radix cache off: one per request asked) outgrow the pools.
    many = fit({**flags, "disable-radix-cache": True, "max-running-requests": 4096}, config)
    assert not many.fits and "KV cache" in many.reason
    assert not fit(flags, config, gpu="L40S").fits


def test_replicas_add_up_and_tensor_parallel_splits_the_state(config):
    flags = start("default-dummy-cold-start")[0]
    one, dp2, tp2 = fit(flags, config), fit({**flags, "dp-size": 2}, config), fit({**flags, "tp-size": 2}, config)
    assert dp2.kv_cache_tokens == 2 * one.kv_cache_tokens and dp2.max_running_requests == 2 * one.max_running_requests
    # half the weights, half of each request's state and of each token's KV heads per GPU
    assert tp2.kv_cache_tokens > 2 * one.kv_cache_tokens and tp2.state_slots > 2 * one.state_slots


def test_no_prediction_for_what_the_model_leaves_out(config):
    flags = start("default-dummy-cold-start")[0]
    assert fit({**flags, "speculative-algorithm": "NEXTN"}, config) is None  # the draft's own pools
    assert fit(flags, config, gpu="unknown-gpu") is None


@pytest.fixture
def h200_study(tmp_path, config) -> Path:
    """configs/h200-dummy.yaml as committed, beside a shape model's config.json where its `../.models/` points."""
    (tmp_path / "configs").mkdir()
    shutil.copy(REPO / "configs" / "h200-dummy.yaml", tmp_path / "configs")
    shutil.copytree(REPO / "configs" / "reference", tmp_path / "configs" / "reference")
    model = tmp_path / ".models" / "qwen3.5-35b-a3b-shape"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(config))
    return tmp_path / "configs" / "h200-dummy.yaml"


def test_a_sweep_checks_its_sglang_trials_against_what_they_reported(h200_study):
    from farm.analysis.accelerator import resolved
    from farm.analysis.results import Status, TrialResult
    from farm.run.memory import check_lines
    from farm.study.grid import expand
    from farm.study.load import load_study

    study = resolved(load_study(h200_study), "H200")  # `accelerator_type: auto` as a sweep on the H200 ran it
    trials = {t.name: t for t in expand(study, "sglang")}
    results = [TrialResult(sweep_id="s", trial=trials[name], status=Status.ok, engine_reported=start(log)[1])
               for name, log in (("engine_sglang_default", "default-dummy-cold-start"),
                                 ("sglang_running_512", "max-running-512-dummy-warm-start"))]
    lines, tags = check_lines(study, results)
    assert lines[0].startswith("memory-fit predictor, KV-cache tokens: largest error 0.")  # under 1 %
    assert all("requests at once predicted 79, reported 79" in line for line in lines[1:])
    assert {t["farm.running_requests_predicted"] for t in tags.values()} == {"79"}


def test_dry_run_shows_sglang_trials_fit_like_vllms(h200_study, tmp_path):
    study = str(h200_study)
    out = run_farm("sweep", "--dry-run", "--grid", "sglang", "--config", study, "--accelerator", "H200", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    trials = out.stdout.split("\n\n")[1:]
    assert len(trials) == 8
    fits = {t.splitlines()[0].split()[1]: t.splitlines()[-1].strip() for t in trials}
    assert all(line.startswith("memory: fits, ~") and "KV-cache tokens predicted, at most" in line
               for line in fits.values()), fits
    reported = start("default-dummy-cold-start")[1]
    default = fits["engine_sglang_default"]
    tokens = int(default.split("~")[1].split()[0].replace(",", ""))
    assert abs(mf.prediction_error(tokens, reported["kv_cache_tokens"])) < TOLERANCE
    assert f"at most {reported['max_running_requests']} requests at once" in default
    assert "at most 512 requests at once" in fits["sglang_running_512_radix_off"]

    seed = run_farm("sweep", "--dry-run", "--grid", "seed", "--config", study, "--accelerator", "H200", cwd=tmp_path)
    assert seed.returncode == 0, seed.stderr
    assert seed.stdout.count("memory: fits, ~") == 6  # vLLM's trials, as before
