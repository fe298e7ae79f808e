"""The end of a sweep writes the answer where users look: the sweep's MLflow run (its description,
its metrics, tags on the trials' runs) and the terminal (checks grouped, the recommendation last,
`--quiet`, `--json`).

A sweep of the smoke study is written to a real SQLite MLflow by farm's own writer
(`farm.store.tracking`, what the actors and the driver call), then ended by the driver side's
`farm.run.sweep_report.finish`, which reads it back from MLflow as a real sweep's end does.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from mlflow.tracking import MlflowClient

from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.run import terminal
from farm.store import schema
from farm.study.grid import expand
from farm.study.load import load_study

REPO = Path(__file__).resolve().parents[3]
GRID = "smoke"
T0 = 1_700_000_000.0


def _metrics(tps: float, tpot: float) -> RunMetrics:
    # mean latency 1.0 s with 50 ms TTFT over 32 output tokens implies ~30.6 ms TPOT: `tpot` far from it warns
    return RunMetrics(successful_requests=48, total_requests=48, success_rate=1.0, duration_s=2.0,
                      total_input_tokens=tps, total_output_tokens=tps, request_throughput=24, output_tps=tps / 2,
                      total_tps=tps, ttft_mean_ms=50.0, ttft_p95_ms=80.0, tpot_mean_ms=tpot, latency_mean_s=1.0,
                      guidellm_total_tps_mean=tps)


def _results(trials) -> list[TrialResult]:
    fast, slow, mid, broken = trials
    out = []
    for i, (trial, tps, tpot) in enumerate(((fast, 1000, 30.0), (slow, 600, 33.0), (mid, 800, 62.0))):
        runs = [ProfileRun(profile=p, repeat=r, status=Status.ok, metrics=_metrics(tps + 7 * r + (50 if p == "smoke_generation" else 0), tpot),
                           started_at=T0 + r) for p in trial.profiles for r in range(3)]
        out.append(TrialResult(sweep_id="", trial=trial, status=Status.ok, runs=runs, serve_command=f"serve {trial.id}",
                               started_at=T0 + i, finished_at=T0 + i + 60, gpus=[]))
    out.append(TrialResult(sweep_id="", trial=broken, status=Status.engine_failed_to_start, runs=[],
                           reason="engine exited with code 2 before it was ready", serve_command="x",
                           started_at=T0, finished_at=T0 + 5))
    return out


@pytest.fixture(scope="module")
def ended(tmp_path_factory):
    """One stored sweep per output mode, as the driver hands it to `finish`."""
    from farm.store import tracking

    tmp = tmp_path_factory.mktemp("answer")
    config = tmp / "study.yaml"
    text = (f"name: answer\nexperiment: answer\nprimary_profile: smoke_chat\nrepeats: 3\n"
            f"include: [{REPO / 'configs' / 'smoke.yaml'}]\n")
    config.write_text(text)
    trials = expand(load_study(str(config)), GRID)
    config.write_text(text + f"baseline: {trials[1].id}\n")  # the slow one: the smoke grid has no engine-default trial
    study = load_study(str(config))
    assert len(trials) == 4
    out = {}
    for mode in ("normal", "quiet", "json"):
        uri = f"sqlite:///{tmp / f'{mode}.db'}"
        exp_id, sweep_id = tracking.start_sweep(uri, study.experiment_name, study, GRID, trials,
                                                command="farm sweep --grid smoke", repeats=3)
        for res in _results(trials):
            res.sweep_id = sweep_id
            tracking.log_trial(uri, exp_id, sweep_id, res, None)
        outcome = SimpleNamespace(sweep_id=sweep_id, experiment_id=exp_id, skipped=[],
                                  results=tracking.load_results(uri, sweep_id))
        out[mode] = {"uri": uri, "sweep_id": sweep_id, "trials": trials, "capture": (uri, outcome, study)}
    return out


def _finish(ended, mode, capsys):
    from farm.run.sweep_report import finish

    uri, outcome, study = ended[mode]["capture"]
    terminal.set_mode(mode)
    try:
        finish(study, GRID, outcome, uri)
    finally:
        terminal.set_mode("normal")
    return capsys.readouterr()


def test_the_sweep_run_describes_the_answer_and_carries_its_numbers(ended, capsys):
    _finish(ended, "normal", capsys)
    uri, sweep_id, trials = ended["normal"]["uri"], ended["normal"]["sweep_id"], ended["normal"]["trials"]
    client = MlflowClient(uri)
    run = client.get_run(sweep_id)
    note = run.data.tags["mlflow.note.content"]
    fast = trials[0]
    command = run.data.tags["farm.recommended_command"]
    assert run.data.tags["farm.recommended_trial"] == fast.id
    assert command and f"```\n{command}\n```" in note  # the command, pasteable, in the run's description
    assert "Verdict per profile" in note and "smoke_chat" in note and "smoke_generation" in note
    assert "Against the baseline" in note and "CI" in note
    assert "engine_failed_to_start" in note and "Failed" in note
    assert "GPU-hours" in note
    m = run.data.metrics
    for profile in ("smoke_chat", "smoke_generation"):
        assert m[f"recommended/{profile}/total_tps"] > m[f"baseline/{profile}/total_tps"] > 0
        assert m[f"recommended/{profile}/tpot_mean_ms"] == pytest.approx(30.0)
        want = (m[f"recommended/{profile}/total_tps"] / m[f"baseline/{profile}/total_tps"] - 1) * 100
        assert m[f"recommended_vs_baseline/{profile}/total_tps_pct"] == pytest.approx(want)
        assert f"recommended_vs_baseline/{profile}/tpot_mean_ms_pct" in m
    assert m["gpu_hours"] == 0  # mock trials hold no GPU
    # The recommended trial's child run can be filtered for; every trial says what selection made of it.
    exp = run.info.experiment_id
    picked = client.search_runs([exp], filter_string="tags.`farm.recommended` = 'true'")
    assert [r.data.tags["farm.trial_id"] for r in picked] == [fast.id]
    children = client.search_runs([exp], filter_string=schema.trials_of_sweep_filter(sweep_id))
    verdicts = {r.data.tags["farm.trial_id"]: r.data.tags.get("farm.verdict") for r in children}
    assert verdicts[fast.id].startswith("recommended")
    assert verdicts[trials[3].id].startswith("not eligible: engine_failed_to_start")
    assert all(verdicts.values())
    status = {r.data.tags["farm.trial_id"]: r.data.tags["farm.status"] for r in children}
    assert status[trials[3].id] == "engine_failed_to_start"
    assert any(k.startswith("flag.") for r in children for k in r.data.params)


def test_the_terminal_groups_the_checks_and_ends_with_the_recommendation(ended, capsys):
    out = _finish(ended, "normal", capsys).out
    lines = [line for line in out.splitlines() if line.strip()]
    # one line per code: how many of the 18 runs, and the worst case, which the stored report lists one by one
    tpot = [line for line in lines if line.strip().startswith("tpot_inconsistent:")]
    assert len(tpot) == 1 and out.count("tpot_inconsistent") == 1, out
    found = re.search(r"tpot_inconsistent: (\d+) of 18 runs, worst (\d+) % apart", tpot[0])
    assert found, tpot[0]
    uri, outcome, _ = ended["normal"]["capture"]
    with tempfile.TemporaryDirectory() as tmp:
        report_md = Path(MlflowClient(uri).download_artifacts(outcome.sweep_id, "report/report.md", tmp)).read_text()
    section = report_md.split("### tpot_inconsistent", 1)[1].split("\n#", 1)[0]
    each = [int(x) for x in re.findall(r"\((\d+) % apart\)", section)]
    assert int(found.group(1)) == len(each) > 1
    assert int(found.group(2)) == max(each)
    # the recommendation is the last thing printed: the command and its evidence
    rec_at = max(i for i, line in enumerate(lines) if line.startswith("recommended:"))
    assert rec_at >= len(lines) - 3
    command = MlflowClient(uri).get_run(outcome.sweep_id).data.tags["farm.recommended_command"]
    assert lines[rec_at + 1].strip() == command
    assert all(not line.startswith("sweep id") for line in lines[rec_at:])


def test_the_stored_report_links_its_appendix_and_plot_stored_beside_it(ended, capsys):
    _finish(ended, "normal", capsys)
    uri, outcome, _ = ended["normal"]["capture"]
    with tempfile.TemporaryDirectory() as tmp:
        def stored(path: str) -> Path:
            return Path(MlflowClient(uri).download_artifacts(outcome.sweep_id, f"{schema.REPORT_DIR}/{path}", tmp))

        report_md = stored("report.md").read_text()
        # the links resolve in MLflow's report/ as in --out DIR: the plots keep their folder
        assert "[appendix.md](appendix.md)" in report_md and "](plots/total_tps_by_profile.png)" in report_md
        assert "Serving Benchmark Result" not in report_md
        # every run the sweep's results file holds (the failed trial's too, with its status)
        runs = json.loads(stored(schema.REPORT_RESULTS).read_text())["runs"]
        assert stored("appendix.md").read_text().count(" Serving Benchmark Result ") == len(runs) > 3 * 3 * 2
        assert stored("plots/total_tps_by_profile.png").stat().st_size > 0
    # and the sweep's run note says where they are
    note = MlflowClient(uri).get_run(outcome.sweep_id).data.tags["mlflow.note.content"]
    assert "every run's figures beside it in `report/appendix.md`, the plots in `report/plots/`" in note


def test_quiet_prints_the_command_and_the_sweep_id_only(ended, capsys):
    out = _finish(ended, "quiet", capsys).out
    uri, outcome, _ = ended["quiet"]["capture"]
    command = MlflowClient(uri).get_run(outcome.sweep_id).data.tags["farm.recommended_command"]
    assert out.splitlines() == [command, f"sweep id: {outcome.sweep_id}"]


def test_json_is_the_only_thing_on_stdout(ended, capsys):
    captured = _finish(ended, "json", capsys)
    summary = json.loads(captured.out)
    uri, outcome, _ = ended["json"]["capture"]
    trials = ended["json"]["trials"]
    assert summary["sweep_id"] == outcome.sweep_id and summary["status"] == "finished"
    assert summary["recommended"]["trial"] == trials[0].id
    assert summary["recommended"]["command"] == MlflowClient(uri).get_run(outcome.sweep_id).data.tags["farm.recommended_command"]
    chat = summary["profiles"]["smoke_chat"]
    assert chat["recommended"]["total_tps"] > chat["baseline"]["total_tps"] and chat["delta_pct"] > 0
    assert len(chat["delta_ci_pct"]) == 2 and chat["verdict"] in ("winner", "equivalent", "undecided", "cannot_tell", "only_candidate")
    assert summary["failures"] == [{"trial": trials[3].id, "label": trials[3].label, "status": "engine_failed_to_start",
                                    "reason": "engine exited with code 2 before it was ready", "attempt": 1}]
    assert summary["counts"] == {"trials": 4, "ok": 3, "failed": 1, "skipped": 0, "pending": 0}
    assert summary["warnings"]["tpot_inconsistent"] > 1
    assert "recommended:" in captured.err  # the person's lines went to stderr
