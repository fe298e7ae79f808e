"""The report's Halving and Memory fit sections: one sweep's as it printed them, several sweeps'
each under its sweep id, in text, markdown and JSON; a report without them is unchanged."""

from __future__ import annotations

import json

import pytest

from farm.analysis import halving as h
from farm.analysis.memory_fit import KvCheck
from farm.analysis.records import results_from_data
from farm.report import render, report_for
from farm.report.models import HalvingNote, MemoryFitNote
from conftest import SEED_FILE

PRIORS = h.Priors(start_s=240, run_s={"chat": 140}, full_requests={"chat": 1000})


@pytest.fixture(scope="module")
def seed_report(seed_data, study):
    return report_for(results_from_data(seed_data, str(SEED_FILE)), study)


def _note(slow_tps: float, sweep_id: str | None = None) -> HalvingNote:
    """A sweep of two trials after rung 1: `slow` stopped when clearly worse than `fast`."""
    rs = h.build_rungs(["chat"], "chat", {"chat": 1000}, 2)
    obs = {t: h.Observed(gpus=1, ran=[1], samples={1: [v, v + 5, v - 5]}, wall_s={1: 600})
           for t, v in (("t1", 1000), ("t2", slow_tps))}
    plan = h.next_rung(rs, ["t1", "t2"], obs, priors=PRIORS, budget_gpu_hours=5.0)
    return HalvingNote(sweep_id=sweep_id, plan=plan, labels={"t1": "fast", "t2": "slow"})


def test_one_sweeps_section_reads_as_the_sweep_printed_it(seed_report):
    note = _note(500)
    report = seed_report.model_copy(update={"halving": [note]})
    lines = h.summary_lines(note.plan, note.labels)
    md = render(report, "markdown").split("## Halving\n\n")[1].split("\n## ")[0]
    assert md.startswith(lines[0] + "\n\n- rung 1: 0.333 GPU-hours\n- stopped slow: rung 1: significantly worse")
    assert "### Sweep" not in md
    text = render(report, "text")
    assert "Halving\n-------\n\n" + lines[0] + "\n\nrung 1: 0.333 GPU-hours\nstopped slow: rung 1:" in text


def test_several_sweeps_each_get_their_section_under_their_sweep_id(seed_report):
    report = seed_report.model_copy(update={
        "halving": [_note(500, "sweep-a"), _note(999, "sweep-b")],
        "memory_fit": [MemoryFitNote(sweep_id="sweep-b", checks=[KvCheck(trial="t1", label="fast", predicted=1010,
                                                                         reported=1000)])]})
    md = render(report, "markdown")
    a, b = md.split("### Sweep `sweep-a`\n\n")[1], md.split("### Sweep `sweep-b`\n\n")[1]
    assert "stopped slow" in a.split("### Sweep")[0] and "stopped slow" not in b.split("\n## ")[0]
    assert "## Memory fit\n\n### Sweep `sweep-b`\n\nmemory-fit predictor" in md
    assert "Sweep sweep-a:\n" in render(report, "text")
    data = json.loads(render(report, "json"))
    assert [s["sweep_id"] for s in data["halving"]] == ["sweep-a", "sweep-b"]
    stop = data["halving"][0]["stops"][0]
    assert (stop["label"], stop["kind"], stop["rung"]) == ("slow", "significantly_worse", 1)
    assert data["halving"][0]["spent_by_rung"] == {"1": pytest.approx(1 / 3, abs=1e-6)}
    assert data["memory_fit"] == [{"sweep_id": "sweep-b", "lines": data["memory_fit"][0]["lines"], "trials": [
        {"trial": "t1", "label": "fast", "predicted": 1010, "reported": 1000, "error_pct": pytest.approx(1.0),
         "running_predicted": None, "running_reported": None}]}]


def test_a_report_without_them_has_neither_section_nor_key(seed_report):
    unmeasured = MemoryFitNote(checks=[KvCheck(trial="t1", label="fast", predicted=1010)])  # nothing reported
    report = seed_report.model_copy(update={"memory_fit": [unmeasured]})
    for plain in (seed_report, report):
        assert "Halving" not in render(plain, "markdown") and "Memory fit" not in render(plain, "markdown")
        assert not {"halving", "memory_fit"} & set(json.loads(render(plain, "json")))
    assert render(report, "markdown") == render(seed_report, "markdown")
