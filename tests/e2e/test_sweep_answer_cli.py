"""End to end: `farm sweep --grid smoke --json` through the CLI (local Ray, real guidellm,
mock-server engines, a temporary SQLite MLflow; the session's one smoke sweep, tests/conftest.py),
then the same sweep ended again with `--resume` (every trial finished: nothing runs, no Ray
starts, the end reports again) in the normal and `--quiet` modes, and finally the sweep's run,
its experiment and its trials' table (farm's trials link) opened in `mlflow ui` in headless Chromium.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from mlflow.tracking import MlflowClient

from conftest import resume_smoke
from farm.run.jobs import DASHBOARD_CLOSED
from farm.run.links import ML_VIEW, mlflow_run_link, mlflow_trials_link
from sweeptools import child_runs

pytestmark = pytest.mark.slow

PROFILES = ("smoke_chat", "smoke_generation")


@pytest.fixture(scope="module")
def swept(smoke_sweep):
    return smoke_sweep  # tests/conftest.py: one smoke sweep for the session


def _sweep_run(swept):
    return MlflowClient(swept["uri"]).get_run(swept["summary"]["sweep_id"])


def test_json_is_the_whole_stdout_and_names_the_recommended_command(swept, study):
    from farm.study.grid import expand

    summary = swept["summary"]
    rec = summary["recommended"]
    assert summary["status"] == "finished" and rec["profile"] == "smoke_chat"
    # ttft 50 ms and itl 10 ms are the grid's lowest latencies
    assert "mock-server" in rec["command"] and "--ttft-ms=50" in rec["command"] and "--itl-ms=10" in rec["command"]
    assert rec["command"] == _sweep_run(swept).data.tags["farm.recommended_command"]
    assert summary["counts"]["trials"] == summary["counts"]["ok"] == len(expand(study, "smoke"))
    assert summary["failures"] == []
    assert set(summary["profiles"]) == set(PROFILES)
    assert all(summary["profiles"][p]["recommended"]["total_tps"] > 0 for p in PROFILES)
    # the link opens the sweep's run in MLflow's runs view (not the GenAI overview)
    link = urlsplit(summary["mlflow_run"])
    assert link.fragment.endswith(f"/runs/{summary['sweep_id']}?{ML_VIEW}")
    assert summary["mlflow_trials"] == mlflow_trials_link(swept["uri"], link.fragment.split("/")[2], summary["sweep_id"])
    # the person's lines went to stderr: the dashboard link with how to open it, the recommendation
    err = swept["proc"].stderr
    assert "Ray dashboard: http://" in err and "recommended:" in err
    # the sweep started its own Ray: its dashboard closes with it, and the end says so and where the results stay
    assert "open it while the sweep runs: it closes with the sweep" in err and DASHBOARD_CLOSED in err
    assert f"trials:   {summary['mlflow_trials']}" in err


def test_the_sweep_run_shows_the_answer(swept):
    run = _sweep_run(swept)
    rec = swept["summary"]["recommended"]
    note = run.data.tags["mlflow.note.content"]
    assert rec["command"] in note and "Verdict per profile" in note
    for p in PROFILES:
        assert run.data.metrics[f"recommended/{p}/total_tps"] == pytest.approx(swept["summary"]["profiles"][p]["recommended"]["total_tps"])
        assert f"recommended/{p}/tpot_mean_ms" in run.data.metrics
    picked = MlflowClient(swept["uri"]).search_runs([run.info.experiment_id], filter_string="tags.`farm.recommended` = 'true'")
    assert [r.data.tags["farm.trial_id"] for r in picked] == [rec["trial"]]


def test_the_terminal_groups_warnings_and_ends_with_the_recommendation(swept, smoke_resumed):
    out = smoke_resumed.stdout
    lines = [line for line in out.splitlines() if line.strip()]
    summary = swept["summary"]
    for code, n in summary["warnings"].items():
        assert sum(line.strip().startswith(f"{code}:") for line in lines) == 1, out  # one line per code
    assert "warning " not in out  # not one line per warning any more
    rec_at = max(i for i, line in enumerate(lines) if line.startswith("recommended:"))
    assert lines[rec_at + 1].strip() == summary["recommended"]["command"]
    assert rec_at >= len(lines) - 3, lines[rec_at:]  # the recommendation, then only its evidence line
    assert "\x1b[" not in out  # no live progress (nor colour) into a pipe


def test_quiet_prints_the_command_and_the_sweep_id(swept):
    proc = resume_smoke(swept, "--quiet")
    summary = swept["summary"]
    assert proc.stdout.splitlines() == [summary["recommended"]["command"], f"sweep id: {summary['sweep_id']}"]


# --------------------------------------------------------------------------------------
# the MLflow UI in a real browser


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _has_playwright() -> bool:
    import importlib.util

    return importlib.util.find_spec("playwright") is not None


@pytest.fixture
def mlflow_ui(swept):
    # Skipped on a developer's machine without the browser; in CI (.ci/run installs both) it must run.
    missing = [what for what, there in (("playwright (pip install -e '.[browser]')", _has_playwright()),
                                         ("Debian's chromium (apt-get install -y chromium)", _chromium() is not None))
               if not there]
    if missing:
        (pytest.fail if os.environ.get("CI") else pytest.skip)("needs " + " and ".join(missing))
    from raynodes import free_ports, stop_group, wait_port

    (port,) = free_ports(1)
    log = swept["tmp"] / "mlflow-ui.log"
    with open(log, "ab") as fh:
        proc = subprocess.Popen([str(Path(sys.executable).with_name("mlflow")), "ui", "--backend-store-uri", swept["uri"],
                                 "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                                cwd=swept["tmp"], stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        wait_port(port, 120)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_group(proc)


def _close_assistant(page) -> None:
    """MLflow 3.17 opens its assistant panel beside every page; closed, the page has the width."""
    close = page.get_by_role("button", name="Close", exact=True)
    if close.count():
        close.first.click()
        page.wait_for_timeout(500)


def test_the_sweep_runs_page_in_a_browser_shows_the_command_and_metrics(swept, mlflow_ui):
    from playwright.sync_api import sync_playwright

    run = _sweep_run(swept)
    rec = swept["summary"]["recommended"]
    url = mlflow_run_link(mlflow_ui, run.info.experiment_id, run.info.run_id)  # the link farm prints
    shots = Path(os.environ.get("FARM_SCREENSHOTS") or swept["tmp"])
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1300})
            page.goto(url, timeout=120_000)
            page.get_by_text("Recommended").first.wait_for(timeout=120_000)
            _close_assistant(page)
            more = page.get_by_text("Show more")
            if more.count():
                more.first.click()  # the whole description
            page.get_by_text("Verdict per profile").first.wait_for(timeout=30_000)
            deadline = time.monotonic() + 60
            while "recommended/smoke_chat/total_tps" not in page.inner_text("body") and time.monotonic() < deadline:
                time.sleep(1)
            text = page.inner_text("body")
            page.screenshot(path=str(shots / "mlflow-sweep-run.png"), full_page=True)
            assert rec["command"] in text.replace("\n", " ") or rec["command"] in text
            assert "recommended/smoke_chat/total_tps" in text
            # the experiment as a user arrives on it from farm's link (no tab chosen): MLflow opens it
            # on its runs, each sweep with its trials under it, not on the GenAI overview
            page.set_viewport_size({"width": 1600, "height": 700})
            page.goto(f"{mlflow_ui}/#/experiments/{run.info.experiment_id}?{ML_VIEW}", timeout=120_000)
            page.get_by_text("matching runs").first.wait_for(timeout=120_000)
            _close_assistant(page)
            name = page.get_by_text(run.info.run_name, exact=True).first
            name.wait_for(timeout=60_000)
            box = name.bounding_box()
            assert box, "the sweep's row is not on the experiment's page"
            page.mouse.click(box["x"] - 30, box["y"] + box["height"] / 2)  # the row's expander, left of its name
            # the sweep's trials, each under it by its run name
            trials = [r.info.run_name for r in child_runs(swept["uri"], run.info.run_id)]
            assert len(trials) == swept["summary"]["counts"]["trials"]
            for trial in trials:
                page.get_by_text(trial, exact=True).first.wait_for(timeout=60_000)
            page.screenshot(path=str(shots / "mlflow-experiment.png"))
            # farm's trials link: the sweep's trials alone, their numbers as columns, best first, no click
            page.goto(mlflow_trials_link(mlflow_ui, run.info.experiment_id, run.info.run_id), timeout=120_000)
            page.get_by_text("matching runs").first.wait_for(timeout=120_000)
            _close_assistant(page)
            column = "metrics.`smoke_chat/total_tps`"
            header = page.locator(f'.ag-header-cell[col-id="{column}"]')
            header.wait_for(timeout=60_000)
            assert "smoke_chat/total_tps" in header.inner_text()
            for name in ("smoke_chat/ttft_mean_ms", "smoke_chat/tpot_mean_ms", "farm.recommended"):
                assert page.locator(f'.ag-header-cell[col-id$="`{name}`"]').count() == 1, name
            for trial in trials:
                page.get_by_text(trial, exact=True).first.wait_for(timeout=60_000)
            page.get_by_text(run.info.run_name, exact=True).wait_for(state="detached", timeout=10_000)  # trials only
            page.screenshot(path=str(shots / "mlflow-trials.png"))

            def shown(col: str) -> list[str]:
                """A column's cells top to bottom (the grid's rows are not in the page's order: by row-index)."""
                cells = page.eval_on_selector_all(
                    f'.ag-center-cols-container .ag-row [col-id="{col}"]',
                    "els => els.map(e => [Number(e.closest('.ag-row').getAttribute('row-index')), e.innerText])")
                return [text for _, text in sorted(cells)]

            tps = [float(v.replace(",", "")) for v in shown(column)]
            assert len(tps) == len(trials) and all(v > 0 for v in tps), tps
            assert tps == sorted(tps, reverse=True)  # best first
            assert sorted(shown("tags.`farm.recommended`")) == ["false"] * (len(trials) - 1) + ["true"]
        finally:
            browser.close()
