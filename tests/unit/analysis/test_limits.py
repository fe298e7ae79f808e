"""Equal budgets: each trial's effective limits (requests at once, KV-cache tokens, batch token
budget) read from its engine's log, the knobs the engine overrode (`knob_overridden`), and an
engine comparison that says when its engines ran under clearly different limits.

Both engines' logs are their real start-up logs from the H200 (bench/h200/engine-logs/: vLLM
0.20.2, SGLang 0.5.16, the weight-free Qwen3.5-35B-A3B)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from farm.analysis.limits import EffectiveLimits, effective_limits, limits_apart
from farm.analysis.records import results_from_data, results_to_data
from farm.engines import get_engine
from farm.report import render, render_appendix, report_for

ROOT = Path(__file__).resolve().parents[3]
VLLM = SGL = ROOT / "bench" / "h200" / "engine-logs"
SGL_DEFAULT = "sglang-0.5.16-default-dummy-cold-start.log"
SGL_512 = "sglang-0.5.16-max-running-512-dummy-warm-start.log"
# stopped during its CUDA-graph capture, before the summary line: its caches are known, not its limit
SGL_512_RADIX_OFF = "sglang-0.5.16-max-running-512-radix-off-dummy-start-stopped.log"


def limits_of(engine: str, log: Path, knobs: dict, flags: dict | None = None) -> EffectiveLimits | None:
    eng = get_engine(engine)
    return effective_limits(engine, knobs, flags or eng.render_knobs(knobs), eng.reported_capacity(log.read_text()))


def test_sglang_caps_512_to_79_with_the_radix_cache_on():
    # The H200's answer to --max-running-requests 512: 398 mamba slots, 79 requests at once.
    lim = limits_of("sglang", SGL / SGL_512, {"max_running_requests": 512})
    assert (lim.max_running_requests, lim.kv_cache_tokens, lim.max_batched_tokens, lim.mamba_cache_size) == \
        (79, 1_392_614, 8192, 398)
    assert [(o.knob, o.asked, o.got) for o in lim.knob_overridden] == [("max_running_requests", 512, 79)]


def test_sglang_sizes_its_state_cache_for_512_with_the_radix_cache_off():
    lim = limits_of("sglang", SGL / SGL_512_RADIX_OFF, {"max_running_requests": 512, "prefix_caching": False})
    assert lim.mamba_cache_size == 512 and lim.kv_cache_tokens == 1_034_198
    # no summary line, so no claim either way about the limit it ran
    assert lim.max_running_requests is None and lim.knob_overridden == []


def test_a_flag_set_directly_is_checked_like_its_knob():
    # --max-running-requests given as a flag, not as the knob: the same finding.
    lim = limits_of("sglang", SGL / SGL_512, {}, {"max-running-requests": 512})
    assert [(o.knob, o.asked, o.got) for o in lim.knob_overridden] == [("max_running_requests", 512, 79)]


def test_sglang_defaults_override_nothing():
    lim = limits_of("sglang", SGL / SGL_DEFAULT, {})
    assert lim.max_running_requests == 79 and lim.max_running_requests_from == "log" and lim.knob_overridden == []


@pytest.mark.parametrize("log, knobs, running, kv, batch", [
    # vLLM 0.20.2 does not log max_num_seqs at its default: the adapter knows it (1024 on a >= 70 GiB GPU)
    ("vllm-0.20.2-bf16-dummy-cold-start.log", {}, 1024, 2_747_830, 8192),
    # --performance-mode throughput doubles both defaults (16384 batched tokens is in the log)
    ("vllm-0.20.2-fp8-prefix-throughput-dummy-cold-start.log", {"prefix_caching": True}, 2048, 3_694_160, 16384),
])
def test_vllm_limits_from_its_h200_logs(log, knobs, running, kv, batch):
    flags = {"performance-mode": "throughput"} if "throughput" in log else {}
    lim = limits_of("vllm", VLLM / log, knobs, flags)
    assert (lim.max_running_requests, lim.kv_cache_tokens, lim.max_batched_tokens) == (running, kv, batch)
    assert lim.max_running_requests_from == "engine default" and lim.knob_overridden == []


def test_no_log_lines_no_limits():
    assert effective_limits("sglang", {"max_running_requests": 512}, {}, {}) is None


def test_limits_apart_names_only_clear_differences():
    a = EffectiveLimits(max_running_requests=1024, kv_cache_tokens=2_747_830, max_batched_tokens=8192)
    b = EffectiveLimits(max_running_requests=83, kv_cache_tokens=1_454_242, max_batched_tokens=8192)
    assert limits_apart(a, b, names=("vllm", "sglang")) == [
        "requests at once: vllm 1,024, sglang 83 (12.3x)", "KV-cache tokens: vllm 2,747,830, sglang 1,454,242 (1.9x)"]
    assert limits_apart(a, a) == [] and limits_apart(a, None) == []


def _with_limits(seed_data):
    """The seed's results with each engine-default run carrying the limits its log gives on the H200."""
    vllm = limits_of("vllm", VLLM / "vllm-0.20.2-bf16-dummy-cold-start.log", {})
    sglang = limits_of("sglang", SGL / SGL_DEFAULT, {})
    capped = limits_of("sglang", SGL / SGL_512, {"max_running_requests": 512})
    data = copy.deepcopy(seed_data)
    for run in data["runs"]:
        lim = {"engine_vllm_default": vllm, "engine_sglang_default": sglang}.get(run.get("trial") or run["id"])
        if run["engine"] == "sglang" and "--max-running-requests=512" in run["flags"]:
            lim = capped
        if lim is not None:
            run["limits"] = lim.model_dump(exclude_none=True)
    return data


def test_the_engine_comparison_names_its_engines_limits(seed_data, study):
    results = results_from_data(_with_limits(seed_data), "limits.json")
    report = report_for(results, study)
    engines = {e.engine: e for e in report.selection.engines}
    assert engines["sglang"].limits.max_running_requests == 79
    assert engines["vllm"].limits.max_running_requests == 1024
    lead = report.selection.engine_lead
    assert lead.leader == "vllm" and "requests at once: vllm 1,024, sglang 79 (13.0x)" in lead.limits_apart
    text = render(report, "markdown")
    engines_section = text.split("Engines on defaults")[1].split("\n#")[0]
    assert "Requests at once" in engines_section and "1,024 (default)" in engines_section and "| 79 |" in engines_section
    assert "clearly different effective limits" in engines_section and "requests at once: vllm 1,024, sglang 79" in engines_section
    assert "Effective limits (from the engine logs)" in render_appendix(report, "markdown")


def test_limits_survive_the_results_file(seed_data, study):
    results = results_from_data(_with_limits(seed_data), "limits.json")
    again = results_from_data(results_to_data(results), "again.json")
    assert [r.limits for r in again.records] == [r.limits for r in results.records]
    assert any(r.limits is not None for r in again.records)


def test_knob_overridden_is_a_report_warning(seed_data, study):
    data = _with_limits(seed_data)
    for run in data["runs"]:
        if run.get("trial", run["id"]) == "engine_sglang_default":
            lim = limits_of("sglang", SGL / SGL_512, {"max_running_requests": 512})
            run["limits"] = lim.model_dump(exclude_none=True)
    report = report_for(results_from_data(data, "limits.json"), study)
    found = [w for w in report.warnings if w.code == "knob_overridden"]
    assert len(found) == 1 and "max_running_requests: asked 512, got 79" in found[0].message
    assert "max_running_requests: asked 512, got 79" in render(report, "text")


def test_limits_and_the_override_reach_mlflow(tmp_path, monkeypatch):
    """A real MLflow store (SQLite): the trial's child run carries limit.* params and the
    farm.knob_overridden tag; the trial's knob params keep their names."""
    from farm.analysis.results import Status, TrialResult
    from farm.store import tracking
    from farm.study.trial import Trial

    monkeypatch.chdir(tmp_path)  # the store's artifacts (./mlruns) land here
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    c = tracking.client(uri)
    exp = tracking.experiment_id(uri, "limits")
    sweep = c.create_run(exp, run_name="sweep").info.run_id
    eng = get_engine("sglang")
    trial = Trial(id="sglang-0000abcd", engine="sglang", model_key="m", model="/models/m",
                  flags=eng.render_knobs({"max_running_requests": 512}), knobs={"max_running_requests": 512},
                  profiles=["throughput"], gpus=1)
    reported = eng.reported_capacity((SGL / SGL_512).read_text())
    result = TrialResult(sweep_id=sweep, trial=trial, status=Status.ok, engine_reported=reported)
    run = c.get_run(tracking.log_trial(uri, exp, sweep, result, None))
    assert run.data.params["knob.max_running_requests"] == "512"
    assert run.data.params["flag.max-running-requests"] == "512"
    assert (run.data.params["limit.max_running_requests"], run.data.params["limit.kv_cache_tokens"],
            run.data.params["limit.max_batched_tokens"], run.data.params["limit.mamba_cache_size"]) == \
        ("79", "1392614", "8192", "398")
    assert run.data.tags["farm.knob_overridden"] == "max_running_requests: asked 512, got 79"
