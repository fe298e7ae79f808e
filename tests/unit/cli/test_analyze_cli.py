"""`farm analyze` as a user runs it: the seed's file end to end, and bad files -> one line, exit 2."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from farm.cli.analyze import analyze
from conftest import SEED_FILE


def invoke(*args: str):
    return CliRunner().invoke(analyze, list(args))


def test_seed_text_report(seed_data):
    res = invoke("--results", str(SEED_FILE))
    assert res.exit_code == 0, res.output
    assert "vllm serve Qwen/Qwen3.5-35B-A3B-FP8 \\\n        --reasoning-parser=qwen3 \\\n        --performance-mode=throughput" in res.stdout
    assert "+9.75 %" in res.stdout and "+33.03 %" in res.stdout


def test_seed_json_end_to_end(seed_data):
    res = invoke("--results", str(SEED_FILE), "--format", "json", "--pick", "stepwise")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["recommended"]["command"] == seed_data["recommended_command"]
    assert data["recommended"]["trial"] == "step3_performance_mode"
    assert [round(c["delta_pct"], 2) for c in data["comparison"]] == [9.75, 33.03, 25.41, 17.25]
    assert round(data["engine_lead"]["total_tps_ahead_pct"], 1) == 92.8
    assert round(data["engine_lead"]["tpot_lower_pct"], 2) == 85.67
    steps = {s["step"]: s for s in data["steps"]}
    assert steps["step4_kv_cache_fp8"]["verdict"] == "rejected"
    assert steps["step_spec_decoding_mtp4"]["verdict"] == "not_eligible" and "51.6 %" in steps["step_spec_decoding_mtp4"]["reason"]
    assert {w["code"] for w in data["warnings"]} >= {"rate_mismatch", "tpot_inconsistent", "itl_zero", "single_run"}
    # guidellm's windowed peak is a note, said once, not a warning per run
    assert "peak_implausible" not in {w["code"] for w in data["warnings"]}
    assert len([n for n in data["notes"] if "peak output rate" in n]) == 1


def test_the_pick_has_its_own_word_and_its_former_name_still_works():
    """`--pick` (how the report picks) is not `farm sweep --strategy` (which search runs); the
    report commands' `--strategy`, its former name, is read as before and hidden from the help."""
    picked = {args: json.loads(invoke("--results", str(SEED_FILE), "--format", "json", *args).stdout)
              for args in [(), ("--pick", "stepwise"), ("--strategy", "stepwise"), ("--pick", "best")]}
    assert [d["strategy"] for d in picked.values()] == ["best", "stepwise", "stepwise", "best"]
    assert picked[("--strategy", "stepwise")]["recommended"] == picked[("--pick", "stepwise")]["recommended"]
    both = invoke("--results", str(SEED_FILE), "--pick", "best", "--strategy", "stepwise")
    assert both.exit_code == 2 and both.output.strip().splitlines()[-1] == (
        "error: --pick: --pick best and --strategy stepwise ask for two picks: --strategy is --pick's former "
        "name; give --pick alone")
    shown = invoke("--help").output
    assert "--pick [best|stepwise]" in shown and "--strategy" not in shown


def test_markdown_and_plots(tmp_path):
    res = invoke("--results", str(SEED_FILE), "--format", "markdown", "--plots", str(tmp_path / "plots"))
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("# Throughput optimization")
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["total_tps_by_profile.png", "tps_vs_tpot.png"]


def test_baseline_option_changes_the_comparison():
    res = invoke("--results", str(SEED_FILE), "--format", "json", "--baseline", "step1_quant_fp8")
    data = json.loads(res.stdout)
    assert data["baseline"]["trial"] == "step1_quant_fp8"
    assert [c["profile"] for c in data["comparison"]] == ["sharegpt"]


def _write(tmp_path: Path, data) -> Path:
    path = tmp_path / "results.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _broken(seed_data: dict, change) -> dict:
    data = copy.deepcopy(seed_data)
    change(data)
    return data


BAD = [
    ("no runs key", lambda d: d.pop("runs"), "runs: required key missing"),
    ("no profiles key", lambda d: d.pop("profiles"), "profiles: required key missing"),
    ("metric not a number", lambda d: d["runs"][7]["metrics"].update(total_tps="fast"),
     'runs[7].metrics.total_tps: expected a number, got "fast"'),
    ("metric as a string number", lambda d: d["runs"][0]["metrics"].update(duration_s="70.72"),
     "runs[0].metrics.duration_s: expected a number"),
    ("flags not a list", lambda d: d["runs"][2].update(flags="--reasoning-parser=qwen3"), "runs[2].flags: expected a list"),
    ("flag without dashes", lambda d: d["runs"][1]["flags"].append("enable-prefix-caching"),
     "runs[1].flags: flags[2] 'enable-prefix-caching' is not a CLI flag"),
    ("missing required metric", lambda d: d["runs"][3]["metrics"].pop("successful_requests"),
     "runs[3].metrics.successful_requests: required metric missing"),
    ("unknown profile", lambda d: d["runs"][4].update(profile="chat"), "runs[4].profile: unknown profile 'chat'"),
    ("profile without total_requests", lambda d: d["profiles"]["throughput"].pop("total_requests"),
     "profiles.throughput.total_requests: required key missing"),
    ("run id repeated", lambda d: d["runs"][5].update(id="step1_quant_fp8"), "runs[5].id: duplicate run id"),
    ("unknown status", lambda d: d["runs"][6].update(status="okk"), 'runs[6].status: unknown value "okk" (known: \'ok\''),
    ("run not a mapping", lambda d: d["runs"].__setitem__(0, 7), "runs[0]: expected a mapping, got 7"),
    ("unknown run key", lambda d: d["runs"][0].update(metircs={}), "runs[0].metircs: unknown key"),
    # half of each profile's requests succeed: below the minimum success rate, yet a plausible fraction
    ("no eligible trial", lambda d: [r["metrics"].update(successful_requests=d["profiles"][r["profile"]]["total_requests"] / 2)
                                     for r in d["runs"]],
     "runs: no eligible trial on the primary profile 'sharegpt'"),
]


@pytest.mark.parametrize("change,expected", [(c, e) for _, c, e in BAD], ids=[b[0] for b in BAD])
def test_bad_results_file_is_one_line_and_exit_2(tmp_path, seed_data, change, expected):
    path = _write(tmp_path, _broken(seed_data, change))
    res = invoke("--results", str(path))
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"error: {path}: ") and expected in lines[0]
    assert "Traceback" not in res.output and res.stdout == ""


@pytest.mark.parametrize("content,expected", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
])
def test_unreadable_results_file_is_one_line_and_exit_2(tmp_path, content, expected):
    path = _write(tmp_path, content)
    res = invoke("--results", str(path))
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1 and expected in res.stderr


def test_missing_file_and_unknown_baseline_are_one_line_and_exit_2(tmp_path):
    res = invoke("--results", str(tmp_path / "nope.json"))
    assert res.exit_code == 2 and res.stderr.strip() == f"error: {tmp_path / 'nope.json'}: file not found"
    res = invoke("--results", str(SEED_FILE), "--baseline", "nope")
    assert res.exit_code == 2 and "--baseline: no trial or run 'nope'" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_bad_config_is_one_line_and_exit_2(tmp_path):
    cfg = tmp_path / "study.yaml"
    cfg.write_text("name: x\nmodels: {}\n")
    res = invoke("--results", str(SEED_FILE), "--config", str(cfg))
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1 and str(cfg) in res.stderr
