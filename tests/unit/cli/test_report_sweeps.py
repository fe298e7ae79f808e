"""`farm report A B`: two sweeps of one study (one grid per engine, as on the H200) reported as one,
with the engines set against each other on every profile, at defaults and at each one's best.

The sweeps are written to a real MLflow store (SQLite in tmp_path) by farm's own writer, as the
trial actors write them; the numbers are chosen so that the verdicts are known."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.cli.main import cli
from farm.study.grid import expand
from farm.study.load import load_study

REPO = Path(__file__).resolve().parents[3]
CONFIG = REPO / "configs" / "h200-dummy.yaml"


def _metrics(tps: float) -> RunMetrics:
    return RunMetrics(successful_requests=100, total_requests=100, success_rate=1.0, duration_s=10.0,
                      total_input_tokens=tps * 5, total_output_tokens=tps * 5, request_throughput=10, output_tps=tps / 2,
                      total_tps=tps, ttft_mean_ms=50.0, ttft_p95_ms=80.0, tpot_mean_ms=20.0)


def _result(trial, sweep_id: str, tps: dict[str, list[float]], reported: dict | None = None) -> TrialResult:
    runs = [ProfileRun(profile=p, repeat=i, status=Status.ok, metrics=_metrics(v), started_at=1.7e9 + i)
            for p, values in tps.items() for i, v in enumerate(values)]
    return TrialResult(sweep_id=sweep_id, trial=trial, status=Status.ok, runs=runs, attempt=1,
                       serve_command=f"serve {trial.id}", started_at=1.7e9, finished_at=1.7e9 + 60,
                       engine_version="0.20.2" if trial.engine == "vllm" else "0.5.16", guidellm_version="0.8.1",
                       node="h200", node_id="a" * 32, gpus=["0"], gpu_name="NVIDIA H200", engine_reported=reported or {})


@pytest.fixture(scope="module")
def store(tmp_path_factory):

    tmp = tmp_path_factory.mktemp("report-sweeps")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    here = os.getcwd()
    os.chdir(tmp)  # a SQLite store's artifacts go to ./mlruns: under tmp, not the repo
    try:
        yield _write_sweeps(uri, tmp)
    finally:
        os.chdir(here)


def _write_sweeps(uri: str, tmp):
    from farm.store import tracking

    study = load_study(CONFIG)
    by_name = {t.label: t for g in ("seed", "sglang") for t in expand(study, g)}
    ids = {}
    # vLLM: its default and one better configuration; SGLang: its default (79 requests at once) and a
    # configuration that lifts its limit; throughput three times each, the primary profile once.
    plan = {
        "seed": {"engine_vllm_default": {"throughput": [30000, 30500, 31000], "sharegpt_synthetic": [11000]},
                 "step3_performance_mode": {"throughput": [37000, 36500, 36400], "sharegpt_synthetic": [11600]}},
        "sglang": {"engine_sglang_default": ({"throughput": [21500, 21600, 21700], "sharegpt_synthetic": [5300]},
                                             {"max_running_requests": 79, "kv_cache_tokens": 1_392_614}),
                   "sglang_running_512_radix_off": {"throughput": [30800, 31000, 31200], "sharegpt_synthetic": [9000]}},
    }
    for grid, trials in plan.items():
        chosen = [by_name[n] for n in trials]
        exp_id, sweep_id = tracking.start_sweep(uri, study.experiment_name, study, grid, chosen,
                                                command=f"farm sweep --grid {grid}", repeats=1)
        for name, spec in trials.items():
            tps, reported = spec if isinstance(spec, tuple) else (spec, None)
            tracking.log_trial(uri, exp_id, sweep_id, _result(by_name[name], sweep_id, tps, reported), None)
        tracking.finish_sweep(uri, sweep_id, "finished", [])
        ids[grid] = sweep_id
    return {"uri": uri, "seed": ids["seed"], "sglang": ids["sglang"], "tmp": tmp}


def _farm(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_two_sweeps_report_the_engines_at_defaults_and_at_their_best(store):
    res = _farm("report", store["seed"], store["sglang"], "--tracking-uri", store["uri"], "--format", "json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert {e["engine"] for e in report["engines"]} == {"vllm", "sglang"}
    matchups = {(m["profile"], m["at"]): m for m in report["engine_matchups"]}
    at_defaults, at_best = matchups[("throughput", "defaults")], matchups[("throughput", "best")]
    assert (at_defaults["leader"], at_defaults["runner_up_trial"]) == ("vllm", "engine_sglang_default")
    # 30,500 against 21,600: +41 %, an interval from three runs each, significant
    assert 40 < at_defaults["diff"]["relative_pct"] < 43 and at_defaults["diff"]["ci_low_pct"] > 30
    assert at_defaults["diff"]["significant"] is True
    assert (at_best["leader_trial"], at_best["runner_up_trial"]) == ("step3_performance_mode",
                                                                     "sglang_running_512_radix_off")
    # the primary profile ran once: a lead without an interval
    assert matchups[("sharegpt_synthetic", "defaults")]["diff"]["ci_low_pct"] is None


def test_the_markdown_names_the_matchups_and_what_was_measured(store):
    res = _farm("report", store["seed"], store["sglang"], "--tracking-uri", store["uri"], "--format", "markdown")
    assert res.exit_code == 0, res.output
    section = res.output.split("Engines profile by profile")[1].split("\n## ")[0]
    assert "| throughput | best | vllm (step3_performance_mode) |" in section
    assert "sglang (sglang_running_512_radix_off)" in section and "single runs: no interval" in section
    assert "Trials measured per engine: vllm 2, sglang 2." in section


def test_the_results_file_of_both_sweeps_reads_back_the_same(store):
    out = store["tmp"] / "both"
    res = _farm("report", store["seed"], store["sglang"], "--tracking-uri", store["uri"], "--format", "json",
                "--out", str(out))
    assert res.exit_code == 0, res.output
    data = json.loads((out / "results.json").read_text())
    assert data["sweeps"] == [store["seed"], store["sglang"]] and data["sweep_id"] == store["seed"]
    again = _farm("analyze", "--results", str(out / "results.json"), "--config", str(CONFIG), "--format", "json")
    assert again.exit_code == 0, again.output
    # stdout alone: --out says what it wrote on stderr
    assert json.loads(again.output)["engine_matchups"] == json.loads(res.stdout)["engine_matchups"]


def test_one_sweep_alone_has_no_engine_matchups(store):
    res = _farm("report", store["sglang"], "--tracking-uri", store["uri"], "--format", "json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["engine_matchups"] == []


@pytest.mark.parametrize("which, needle", [
    (("seed", "seed"), "a sweep is named twice"),
    (("seed", "missing"), "no sweep with id '0123456789abcdef0123456789abcdef'"),
])
def test_bad_sweep_lists_are_one_line_errors(store, which, needle):
    ids = [store.get(w, "0123456789abcdef0123456789abcdef") for w in which]
    res = CliRunner().invoke(cli, ["report", *ids, "--tracking-uri", store["uri"]])
    assert res.exit_code == 2 and needle in res.output and "Traceback" not in res.output
