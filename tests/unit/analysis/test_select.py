"""Selection over run records: the seed's own conclusion from its numbers, and cases where it must differ."""

from __future__ import annotations

import copy

import pytest

from farm.errors import UserError
from farm.study.grid import expand
from farm.analysis.results_file import read_results_file
from farm.analysis.records import records_from_trials, results_from_data, write_results_file
from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.analysis.select import SelectionSettings, select, settings_for

SEED_FLAGS = {"--reasoning-parser=qwen3", "--performance-mode=throughput", "--max-model-len=32768", "--enable-prefix-caching"}


def seed_with(seed_data: dict, **tps: float) -> dict:
    """The seed's file with the recorded total_tps of some runs changed."""
    data = copy.deepcopy(seed_data)
    for run in data["runs"]:
        if run["id"] in tps:
            run["metrics"]["total_tps"] = tps[run["id"]]
    return data


def run_select(data: dict, study, strategy: str = "best", baseline: str | None = None):
    results = results_from_data(data, "constructed.json")
    return select(results, settings_for(results, study, baseline=baseline), strategy)


# ------------------------------------------------------------------ the seed, replayed


@pytest.mark.parametrize("strategy", ["best", "stepwise"])
def test_seed_recommends_the_fp8_model_with_the_seeds_four_flags(seed_data, study, strategy):
    sel = run_select(seed_data, study, strategy)
    assert sel.recommended.model == "Qwen/Qwen3.5-35B-A3B-FP8"
    assert set(sel.recommended.flags) == SEED_FLAGS and len(sel.recommended.flags) == 4
    assert sel.recommended.command == seed_data["recommended_command"]


def test_seed_deltas_per_profile_are_the_published_ones(seed_data, study):
    sel = run_select(seed_data, study)
    assert sel.baseline.trial == "engine_vllm_default"
    assert [(r.profile, round(r.delta_pct, 2)) for r in sel.comparison] == [
        ("sharegpt", 9.75), ("throughput", 33.03), ("long_context", 25.41), ("generation_heavy", 17.25)]
    assert sel.unmeasured == []


def test_seed_vllm_is_ahead_of_sglang_by_92_8_percent_with_85_67_percent_lower_tpot(seed_data, study):
    lead = run_select(seed_data, study).engine_lead
    assert (lead.leader, lead.runner_up, lead.profile) == ("vllm", "sglang", "sharegpt")
    assert round(lead.total_tps_ahead_pct, 1) == 92.8
    assert round(lead.tpot_lower_pct, 2) == 85.67
    assert round(lead.total_tps_ahead, 2) == 4636.35


def test_seed_fp8_kv_cache_step_is_rejected_as_lower_than_the_step_before(seed_data, study):
    steps = {s.step: s for s in run_select(seed_data, study, "stepwise").steps}
    kv = steps["step4_kv_cache_fp8"]
    assert kv.verdict == "rejected" and kv.after == "step3_performance_mode"
    assert "lower than the step before" in kv.reason
    assert kv.added_flags == ["--kv-cache-dtype=fp8"]
    # The seed's summary table measures each step against the baseline: +3.23, +7.34, +9.75, +7.60 %.
    assert [round(steps[n].delta_vs_baseline_pct, 2) for n in
            ("step1_quant_fp8", "step2_prefix_cache", "step3_performance_mode", "step4_kv_cache_fp8")] == [3.23, 7.34, 9.75, 7.60]
    assert steps["engine_sglang_default"].verdict == "rejected"


def test_seed_speculative_decoding_is_not_eligible_with_its_success_rate_in_the_reason(seed_data, study):
    sel = run_select(seed_data, study, "stepwise")
    row = next(t for t in sel.trials if t.id == "step_spec_decoding_mtp4")
    assert not row.eligible and "51.6 %" in row.reason and "516 of 1000" in row.reason
    step = next(s for s in sel.steps if s.step == "step_spec_decoding_mtp4")
    assert step.verdict == "not_eligible" and "51.6 %" in step.reason
    # It has the highest recorded throughput of all; the gate is what keeps it out.
    assert row.total_tps == max(t.total_tps for t in sel.trials if t.profile == "sharegpt")


def test_runs_of_one_configuration_are_one_trial_whatever_the_file_calls_them(seed_data, study):
    sel = run_select(seed_data, study)
    baseline_rows = [t for t in sel.trials if t.id == "engine_vllm_default"]
    assert {t.profile for t in baseline_rows} == {"sharegpt", "throughput", "long_context", "generation_heavy"}
    assert next(t for t in baseline_rows if t.profile == "throughput").runs == ["final_baseline_throughput"]


def test_flags_compare_as_sets(seed_data, study):
    data = copy.deepcopy(seed_data)
    for run in data["runs"]:
        run["flags"] = list(reversed(run["flags"]))
    sel = run_select(data, study)
    assert sel.recommended.trial == "step3_performance_mode"
    assert [round(r.delta_pct, 2) for r in sel.comparison] == [9.75, 33.03, 25.41, 17.25]


def test_json_flag_values_compare_by_content_not_key_order(seed_data, study):
    data = copy.deepcopy(seed_data)
    spec_run = next(r for r in data["runs"] if r["id"] == "step_spec_decoding_mtp4")
    spec_run["flags"] = [f.replace('{"method":"mtp","num_speculative_tokens":4}', '{"num_speculative_tokens": 4, "method": "mtp"}')
                         for f in spec_run["flags"]]
    step = next(s for s in run_select(data, study, "stepwise").steps if s.step == "step_spec_decoding_mtp4")
    assert step.trial == "step_spec_decoding_mtp4" and step.verdict == "not_eligible"


# ------------------------------------------------------------------ constructed results


def test_another_trial_wins_when_its_numbers_are_higher(seed_data, study):
    data = seed_with(seed_data, step4_kv_cache_fp8=11000.0)
    for strategy in ("best", "stepwise"):
        sel = run_select(data, study, strategy)
        assert sel.recommended.trial == "step4_kv_cache_fp8"
        assert "--kv-cache-dtype=fp8" in sel.recommended.command


def test_recommended_trial_not_measured_on_a_profile_is_said_never_filled_in(seed_data, study):
    # step4 wins on ShareGPT but the seed ran only the step-3 command on the other profiles.
    sel = run_select(seed_with(seed_data, step4_kv_cache_fp8=11000.0), study)
    assert [r.profile for r in sel.comparison] == ["sharegpt"]
    missing = {(u.profile, u.role) for u in sel.unmeasured}
    assert missing == {("throughput", "recommended"), ("long_context", "recommended"), ("generation_heavy", "recommended")}
    assert all("not measured" in u.reason for u in sel.unmeasured)


def test_stepwise_and_best_disagree_when_a_rejected_step_hides_the_global_best(seed_data, study):
    # Prefix caching now loses to FP8 alone, so the seed's method never reaches performance mode,
    # although the measured performance-mode run is the fastest of all.
    data = seed_with(seed_data, step2_prefix_cache=9900.0)
    best, stepwise = run_select(data, study, "best"), run_select(data, study, "stepwise")
    assert best.recommended.trial == "step3_performance_mode"
    assert stepwise.recommended.trial == "step1_quant_fp8"
    assert (best.best_trial, best.stepwise_trial) == ("step3_performance_mode", "step1_quant_fp8")
    verdicts = {s.step: s.verdict for s in stepwise.steps}
    assert verdicts["step2_prefix_cache"] == "rejected"
    assert verdicts["step3_performance_mode"] == verdicts["step4_kv_cache_fp8"] == "skipped"


def test_baseline_can_be_named_by_trial_or_by_run_id(seed_data, study):
    sel = run_select(seed_data, study, baseline="step1_quant_fp8")
    assert sel.baseline.trial == "step1_quant_fp8"
    assert [r.profile for r in sel.comparison] == ["sharegpt"]
    assert round(sel.comparison[0].delta_pct, 2) == round((10570.88 - 9942.93) / 9942.93 * 100, 2)
    by_run = run_select(seed_data, study, baseline="final_baseline_throughput")
    assert by_run.baseline.trial == "engine_vllm_default"
    with pytest.raises(UserError, match="no trial or run 'nope'"):
        run_select(seed_data, study, baseline="nope")


def _run(rid: str, flags: list[str], tps: float, ok: int = 100, profile: str = "chat", status: str = "ok") -> dict:
    metrics = {"successful_requests": ok, "total_tps": tps, "tpot_mean_ms": 10.0,
               "duration_s": 10.0, "total_input_tokens": tps * 5, "total_output_tokens": tps * 5}
    run = {"id": rid, "engine": "mock", "model": "tiny", "flags": flags, "profile": profile, "metrics": metrics}
    if status != "ok":
        run.update(status=status, reason="boom", metrics={})
    return run


def _settings(**kw) -> SelectionSettings:
    return SelectionSettings(primary_profile="chat", required_flags={"mock": ["--ttft-ms=10"]}, engine_order=["mock"],
                             model_order=["tiny"], **kw)


def test_repeats_are_averaged_and_one_failed_repeat_makes_a_trial_ineligible():
    # Repeats close together: c's lead over a is significant, so c wins (a noisier lead would be a
    # tie, recommending the simpler a; see tests/unit/analysis/test_evidence.py).
    runs = [_run("a0", ["--ttft-ms=10"], 108), _run("a1", ["--ttft-ms=10"], 112),
            _run("b0", ["--ttft-ms=10", "--itl-ms=1"], 300), _run("b1", ["--ttft-ms=10", "--itl-ms=1"], 0, status="oom"),
            _run("c0", ["--ttft-ms=10", "--itl-ms=4"], 158), _run("c1", ["--itl-ms=4", "--ttft-ms=10"], 162)]
    results = results_from_data({"profiles": {"chat": {"total_requests": 100}}, "runs": runs}, "r.json")
    sel = select(results, _settings())
    rows = {t.id: t for t in sel.trials}
    assert rows["a0"].total_tps == 110 and rows["a0"].repeats == 2
    assert not rows["b0"].eligible and "1 of 2 runs failed" in rows["b0"].reason and "oom" in rows["b0"].reason
    assert sel.recommended.trial == "c0" and sel.recommended.total_tps == 160
    assert sel.baseline.trial == "a0"


def test_no_eligible_trial_is_a_user_error():
    runs = [_run("a", ["--ttft-ms=10"], 100, ok=50), _run("b", ["--ttft-ms=10", "--itl-ms=1"], 0, status="oom")]
    results = results_from_data({"profiles": {"chat": {"total_requests": 100}}, "runs": runs}, "r.json")
    with pytest.raises(UserError, match="no eligible trial"):
        select(results, _settings())


def test_stepwise_without_ordered_steps_is_a_user_error():
    results = results_from_data({"profiles": {"chat": {"total_requests": 100}},
                                 "runs": [_run("a", ["--ttft-ms=10"], 100)]}, "r.json")
    assert select(results, _settings()).steps == []
    with pytest.raises(UserError, match="no ordered grid"):
        select(results, _settings(), "stepwise")


def test_selection_depends_on_records_only_not_on_their_order(seed_data, study):
    data = copy.deepcopy(seed_data)
    data["runs"].reverse()
    forward, backward = run_select(seed_data, study), run_select(data, study)
    assert backward.recommended.command == forward.recommended.command
    assert {(r.profile, r.delta_pct) for r in backward.comparison} == {(r.profile, r.delta_pct) for r in forward.comparison}


# ------------------------------------------------------------------ farm's own results


def _trial_results(study, seed_data) -> list[TrialResult]:
    """The seed's ShareGPT runs as farm would have recorded them: total_tps from totals, guidellm's mean beside it."""
    by_name = {r["id"]: r for r in seed_data["runs"] if r["profile"] == "sharegpt"}
    out = []
    for trial in expand(study, "seed"):
        m = by_name[trial.name]["metrics"]
        tokens = m["total_input_tokens"] + m["total_output_tokens"]
        metrics = RunMetrics(
            successful_requests=m["successful_requests"], total_requests=1000, success_rate=m["successful_requests"] / 1000,
            duration_s=m["duration_s"], total_input_tokens=m["total_input_tokens"], total_output_tokens=m["total_output_tokens"],
            request_throughput=m["request_throughput"], output_tps=m["total_output_tokens"] / m["duration_s"],
            total_tps=tokens / m["duration_s"], guidellm_total_tps_mean=m["total_tps"], tpot_mean_ms=m["tpot_mean_ms"])
        run = ProfileRun(profile="sharegpt", status=Status.ok, metrics=metrics)
        out.append(TrialResult(sweep_id="s1", trial=trial.model_copy(update={"profiles": ["sharegpt"]}),
                               status=Status.ok, runs=[run], node="node-1"))
    return out


def test_farm_trial_results_go_through_the_same_selection_and_survive_a_results_file(study, seed_data, tmp_path):
    results = records_from_trials(_trial_results(study, seed_data), study, grid="seed", sweep_id="s1")
    assert {r.profile for r in results.records} == {"sharegpt"}
    assert results.primary_profile == "sharegpt" and results.sweep_id == "s1"
    sel = select(results, settings_for(results, study), "stepwise")
    # farm ranks by tokens / duration, under which FP8 alone is the best the seed measured.
    assert sel.recommended.name == "step1_quant_fp8"
    assert sel.recommended.command == "vllm serve Qwen/Qwen3.5-35B-A3B-FP8 --reasoning-parser=qwen3 --max-model-len=32768"
    assert sel.baseline.name == "engine_vllm_default"

    path = write_results_file(results, tmp_path / "sweep-results.json")
    again = read_results_file(path)
    assert again.records == results.records
    assert select(again, settings_for(again, study), "stepwise") == sel


def test_a_trial_that_never_started_is_listed_as_not_eligible(study, seed_data):
    trs = _trial_results(study, seed_data)
    failed = trs[3].model_copy(update={"status": Status.engine_failed_to_start, "reason": "port 8000 refused", "runs": []})
    results = records_from_trials(trs[:3] + [failed] + trs[4:], study, grid="seed")
    sel = select(results, settings_for(results, study))
    row = next(t for t in sel.trials if t.name == failed.trial.name)
    assert not row.eligible and row.total_tps is None
    assert row.reason == "engine_failed_to_start: port 8000 refused"


def test_a_study_baseline_that_names_nothing_is_an_error_naming_the_study(seed_data, study):
    results = results_from_data(seed_data, "r.json")
    settings = settings_for(results, study.model_copy(update={"baseline": "nope"}))
    with pytest.raises(UserError, match=r"baseline \(in .*qwen3.5-35b-a3b-h200.yaml\): no trial or run 'nope'"):
        select(results, settings)
