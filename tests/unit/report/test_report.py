"""The report: the seed's shape, every check the seed missed, the recomputed-rate analysis, plots."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from farm.analysis.records import results_from_data
from farm.report import WARNING_CODES, build_report, render, render_appendix, report_for, report_json, write_plots
from farm.analysis.select import settings_for
from conftest import SEED_FILE


@pytest.fixture(scope="module")
def seed_report(seed_data, study):
    return report_for(results_from_data(seed_data, str(SEED_FILE)), study)


def warnings_of(report, code: str) -> list:
    return [w for w in report.warnings if w.code == code]


def constructed(seed_data, study, strategy="best", **tps):
    data = copy.deepcopy(seed_data)
    for run in data["runs"]:
        if run["id"] in tps:
            run["metrics"]["total_tps"] = tps[run["id"]]
    return report_for(results_from_data(data, "constructed.json"), study, strategy=strategy)


# ------------------------------------------------------------------ checks the seed missed


def test_rate_mismatch_names_both_numbers_for_each_run_off_by_more_than_2_percent(seed_report):
    runs = warnings_of(seed_report, "rate_mismatch")
    by_run = {(w.trial, w.profile): w.message for w in runs if w.trial}
    assert "9632.01" in by_run[("engine_vllm_default", "sharegpt")] and "8816.04" in by_run[("engine_vllm_default", "sharegpt")]
    assert "50464.84" in by_run[("step3_performance_mode", "throughput")] and "35114.29" in by_run[("step3_performance_mode", "throughput")]
    spec = by_run[("step_spec_decoding_mtp4", "sharegpt")]
    assert "15514.15" in spec and "9562.67" in spec and "62.24 % above" in spec
    # Within 1 % for SGLang and the generation-heavy runs: no warning there.
    assert ("engine_sglang_default", "sharegpt") not in by_run
    assert not [k for k in by_run if k[1] == "generation_heavy"]


def test_rate_analysis_names_the_command_each_metric_recommends(seed_report, seed_data):
    rate = seed_report.rate_analysis
    assert rate.other_metric == "tps_from_totals" and rate.recommendation_changes
    best = {c.metric: c for c in rate.choices if c.strategy == "best"}
    assert best["total_tps"].trial == "step3_performance_mode"
    assert best["total_tps"].command == seed_data["recommended_command"]
    assert best["tps_from_totals"].trial == "step1_quant_fp8"
    assert best["tps_from_totals"].command == "vllm serve Qwen/Qwen3.5-35B-A3B-FP8 --reasoning-parser=qwen3 --max-model-len=32768"
    assert round(best["tps_from_totals"].value) == 9579 and round(best["tps_from_totals"].other_value, 2) == 9942.93
    # FP8 alone beats FP8 + prefix caching and FP8 + prefix caching + performance mode under the recomputed rate.
    recomputed = {r.trial: round(r.recomputed) for r in rate.primary}
    assert recomputed["step1_quant_fp8"] == 9579 and recomputed["step2_prefix_cache"] == 9427
    assert recomputed["step3_performance_mode"] == 9555
    assert rate.primary[0].trial == "step3_performance_mode" and rate.primary[0].recomputed_rank == 2
    # The published gains shrink: +22.0 % instead of +33.03 % on the throughput profile.
    gains = {g.profile: g for g in rate.gains}
    assert round(gains["throughput"].recorded_delta_pct, 2) == 33.03
    assert round(gains["throughput"].recomputed_delta_pct, 1) == 22.0
    summary = [w for w in warnings_of(seed_report, "rate_mismatch") if w.trial is None]
    assert len(summary) == 1 and "step1_quant_fp8" in summary[0].message and "step3_performance_mode" in summary[0].message


def test_tpot_inconsistent_on_the_seeds_vllm_rows(seed_report):
    tpot = {(w.trial, w.profile): w.message for w in warnings_of(seed_report, "tpot_inconsistent")}
    msg = tpot[("engine_vllm_default", "generation_heavy")]
    assert "2.48 ms" in msg and "27.77 ms" in msg
    # ShareGPT's lengths vary: the mean from the totals is used (the field's TPOT is token-weighted in
    # guidellm, so it follows from the means exactly); every vLLM row there is too small by ~3.5 x
    sharegpt = [k for k in tpot if k[1] == "sharegpt"]
    assert "engine_vllm_default" in {t for t, _ in sharegpt} and "3.6 x too small" in tpot[("engine_vllm_default", "sharegpt")]


def test_the_windowed_peak_is_one_note_not_a_warning_per_run(seed_report):
    assert not warnings_of(seed_report, "peak_implausible")
    peak, = [n for n in seed_report.notes if "peak output rate" in n]
    assert "100,865,026.05" in peak  # the largest of the seed's peaks, named once


def test_itl_zero_on_runs_with_many_output_tokens(seed_report):
    itl = {(w.trial, w.profile) for w in warnings_of(seed_report, "itl_zero")}
    assert ("engine_vllm_default", "throughput") in itl and ("step3_performance_mode", "long_context") in itl
    assert ("engine_vllm_default", "sharegpt") not in itl  # 11.46 ms there


def test_single_run_is_said_once_for_a_study_without_repeats(seed_report):
    single = warnings_of(seed_report, "single_run")
    assert len(single) == 1 and single[0].trial is None and "13 runs" in single[0].message


def test_local_optimum_when_stepwise_misses_the_global_best(seed_data, study):
    report = constructed(seed_data, study, strategy="stepwise", step2_prefix_cache=9900.0)
    [w] = warnings_of(report, "local_optimum")
    assert w.trial == "step1_quant_fp8" and "step3_performance_mode" in w.message
    assert report.selection.recommended.trial == "step1_quant_fp8"
    assert "local_optimum" in render(report)


def test_no_local_optimum_on_the_seeds_own_numbers(seed_report):
    assert warnings_of(seed_report, "local_optimum") == []


def test_every_warning_code_is_reachable(seed_report, seed_data, study):
    codes = {w.code for w in seed_report.warnings} | {w.code for w in constructed(seed_data, study, step2_prefix_cache=9900.0).warnings}
    # no limits in the seed file, and no engine log to say which MoE kernels ran (tests/unit/report/test_moe_config_check.py)
    assert set(WARNING_CODES) - {"no_baseline", "knob_overridden", "moe_default_config"} <= codes


def test_guidellm_mean_is_checked_against_totals_in_farm_results():
    runs = [{"id": f"r{i}", "engine": "mock", "model": "tiny", "flags": [f"--itl-ms={i}"], "profile": "chat",
             "metrics": {"successful_requests": 10, "total_tps": 100.0 * i, "guidellm_total_tps_mean": 130.0 * i,
                         "duration_s": 10.0, "total_input_tokens": 500.0 * i, "total_output_tokens": 500.0 * i}}
            for i in (1, 2)]
    results = results_from_data({"profiles": {"chat": {"total_requests": 10}}, "runs": runs}, "farm.json")
    from farm.analysis.select import SelectionSettings

    report = build_report(results, SelectionSettings(primary_profile="chat"))
    msgs = [w.message for w in warnings_of(report, "rate_mismatch")]
    assert len(msgs) == 2 and "guidellm's mean token rate 130.00" in msgs[0] and "30.00 % above" in msgs[0]
    assert report.rate_analysis.other_metric == "guidellm_total_tps_mean"
    assert warnings_of(report, "no_baseline")  # no trial with only the required flags


# ------------------------------------------------------------------ shapes


def test_text_report_leads_with_the_command_and_the_before_after_table(seed_report, seed_data):
    text = render(seed_report, "text")
    head = text[: text.index("Checks")]
    assert "vllm serve Qwen/Qwen3.5-35B-A3B-FP8 \\\n        --reasoning-parser=qwen3 \\" in head
    for number in ("9632.01", "10570.88", "+9.75 %", "+33.03 %", "+25.41 %", "+17.25 %", "2.48", "2.92"):
        assert number in head
    assert "step1_quant_fp8" in head  # the metric caveat is in the conclusion, not buried
    assert "vllm is faster than sglang by 4,636.35 tok/s (92.8 %)" in text and "(85.67 %)" in text
    assert "rejected: lower than the step before" in text


def test_markdown_report_has_the_seeds_sections_and_its_appendix_one_result_block_per_run(seed_report, seed_data):
    md = render(seed_report, "markdown")
    for section in ("## Conclusion", "## Checks", "## Engines on defaults", "## Optimization steps"):
        assert section in md
    assert "| sharegpt | 9632.01 | 25.89 | 10570.88 | +9.75 % | 24.71 |" in md
    # every run's figures are the appendix's, which the report links; none of them in the report
    assert "Serving Benchmark Result" not in md and "## Runs" not in md and "[appendix.md](appendix.md)" in md
    appendix = render_appendix(seed_report, "markdown")
    assert "## Runs" in appendix and "[report.md](report.md)" in appendix
    assert appendix.count("============ Serving Benchmark Result ============") == len(seed_data["runs"])
    assert "Total Token throughput (tok/s):          9632.01" in appendix


def test_unmeasured_profiles_are_named_and_get_no_number(seed_data, study):
    report = constructed(seed_data, study, step4_kv_cache_fp8=11000.0)
    text = render(report, "text")
    conclusion = text[: text.index("Checks")]
    assert "throughput: the recommended trial step4_kv_cache_fp8 has no number here: not measured on this profile" in conclusion
    # The step-3 command's throughput-profile figure must not be passed off as step 4's.
    assert "50464.84" not in conclusion
    data = report_json(report)
    assert [c["profile"] for c in data["comparison"]] == ["sharegpt"]
    assert {u["profile"] for u in data["unmeasured"]} == {"throughput", "long_context", "generation_heavy"}


def test_json_object_has_the_keys_of_issue_3(seed_report):
    data = json.loads(render(seed_report, "json"))
    assert {"command", "trial"} <= set(data["recommended"])
    assert {"id", "engine", "model", "flags", "profile", "total_tps", "success_rate", "eligible", "reason"} <= set(data["trials"][0])
    assert {"profile", "baseline_total_tps", "recommended_total_tps", "delta_pct", "baseline_tpot_mean_ms",
            "recommended_tpot_mean_ms"} <= set(data["comparison"][0])
    assert {"engine", "total_tps", "tpot_mean_ms"} <= set(data["engines"][0])
    assert {"step", "trial", "delta_pct", "verdict"} <= set(data["steps"][0])
    assert {"code", "trial", "message"} <= set(data["warnings"][0])


def test_plots_are_written_as_png(seed_report, tmp_path):
    paths = write_plots(seed_report, tmp_path / "plots")
    assert [p.name for p in paths] == ["total_tps_by_profile.png", "tps_vs_tpot.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000


def test_the_pure_layer_imports_neither_ray_nor_mlflow():
    code = ("import sys\nimport farm.analysis.records, farm.analysis.select, farm.report.build, farm.cli.analyze\n"
            "print(','.join(m for m in ('ray', 'mlflow', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""  # matplotlib too: it loads only when plots are asked for


def test_settings_fall_back_to_the_results_primary_profile_only_when_asked(seed_data, study):
    data = {**copy.deepcopy(seed_data), "primary_profile": "throughput"}
    results = results_from_data(data, "r.json")
    assert settings_for(results, study).primary_profile == "sharegpt"
    assert settings_for(results, study, prefer_results_profile=True).primary_profile == "throughput"


def test_the_conclusion_names_the_success_floor_the_primary_profile_is_judged_by(seed_data, study):
    from farm.report import render
    from farm.study.sections import SLOSpec

    profiles = dict(study.profiles)
    primary = study.primary_profile
    profiles[primary] = profiles[primary].model_copy(update={"slo": SLOSpec(min_success_rate=0.9)})
    report = report_for(results_from_data(seed_data, str(SEED_FILE)), study.model_copy(update={"profiles": profiles}))
    text = render(report, "text")
    assert "with a success rate of at least 90 %" in text and "at least 99 %" not in text
    assert "with a success rate of at least 99 %" in render(report_for(results_from_data(seed_data, str(SEED_FILE)),
                                                                       study), "text")


def test_the_study_s_deciding_metric_ranks_the_trials():
    # a ranks first by totals (its ramp and drain are short), b while both hold full concurrency
    def runs(name, itl, total, steady):
        return [{"id": f"{name}{i}", "engine": "mock", "model": "tiny", "flags": [f"--itl-ms={itl}"], "profile": "chat",
                 "metrics": {"successful_requests": 10, "total_tps": total + i, "steady_tps": steady + i,
                             "duration_s": 10.0, "total_input_tokens": 500.0, "total_output_tokens": 500.0}}
                for i in (-1, 0, 1)]

    from farm.analysis.select import SelectionSettings

    data = {"profiles": {"chat": {"total_requests": 10}}, "runs": runs("a", 1, 120, 100) + runs("b", 2, 100, 130)}
    by_totals = build_report(results_from_data(data, "farm.json"), SelectionSettings(primary_profile="chat"))
    by_steady = build_report(results_from_data({**data, "deciding_metric": "steady_tps"}, "farm.json"),
                             SelectionSettings(primary_profile="chat"))
    assert "--itl-ms=1" in by_totals.selection.recommended.flags
    assert "--itl-ms=2" in by_steady.selection.recommended.flags and by_steady.selection.metric == "steady_tps"
    for fmt in ("text", "markdown", "json"):  # every rendering names the number it ranked by
        assert "full concurrency" in render(by_steady, fmt) or "steady_tps" in render(by_steady, fmt)
