"""Machines as blocks (issue 45 item 3, farm/analysis/stats/blocks.py): a comparison within the
machines two trials share, across machines only through a control that ran on each, and never a
decision from runs of different machines pooled. On the runs committed under bench/: the H200's
results, which record no machine (they report as before), and the same runs with each run's Ray
node taken as its machine (what a `farm.machine` label would have said); and on real runs moved
to a second machine by a known factor, where the right answer is known by construction."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from farm.analysis.records import Results, RunRecord
from farm.analysis.results_file import read_results_file
from farm.analysis.select import build_table, settings_for
from farm.analysis.selection.machines import cell_blocks
from farm.analysis.stats import Control, blocked_difference, compare_winner, decide, relative_difference
from farm.report.build import build_report
from farm.report.text import render, report_json
from farm.study.load import load_study

REPO = Path(__file__).resolve().parents[3]
H200 = REPO / "bench" / "h200" / "results.json"
CPU = REPO / "bench" / "vllm-cpu" / "from-command" / "results.json"


@pytest.fixture(scope="module")
def h200() -> Results:
    return read_results_file(H200)


@pytest.fixture(scope="module")
def study():
    return load_study()


def runs(results: Results, profile: str, name: str) -> list[RunRecord]:
    return [r for r in results.records if r.profile == profile and r.label == name and r.measured]


def tps(records: list[RunRecord]) -> list[float]:
    return [r.metrics["total_tps"] for r in records]


def by_node(records: list[RunRecord]) -> dict[str, list[float]]:
    """Runs by their Ray node (`vm-<node id>`); pass 2's runs named only 'vm' say no node, so they are left out."""
    out: dict[str, list[float]] = {}
    for r in records:
        if r.node and r.node != "vm":
            out.setdefault(r.node, []).append(r.metrics["total_tps"])
    return out


def with_node_machines(results: Results) -> Results:
    """The H200 runs with each run's Ray node as its machine key (a run on a bare 'vm' stays unrecorded)."""
    records = []
    for r in results.records:
        key = r.node if r.node and r.node != "vm" else None
        prov = r.provenance.model_copy(update={"machine_key": key}) if r.provenance else None
        records.append(r.model_copy(update={"provenance": prov}))
    return results.model_copy(update={"records": records})


# ------------------------------------------------------------------ results without machines


@pytest.mark.parametrize("path", [H200, CPU], ids=["h200", "vllm-cpu"])
def test_results_without_a_machine_report_as_before_and_say_so_once(path, study):
    results = read_results_file(path)
    assert not any(r.provenance and r.provenance.machine_key for r in results.records)
    report = build_report(results, settings_for(results, study, prefer_results_profile=True))
    sel = report.selection
    # every comparison is one of one machine, and decides as the pooled test always did
    for v in sel.verdicts:
        for c in v.comparisons:
            assert c.machines == "one_machine"
        table = {t.id: t for t in sel.trials if t.profile == v.profile}
        assert v.candidates == len([t for t in table.values() if t.eligible])
    notes = [n for n in report.notes if "machine" in n]
    assert len(notes) == 1 and notes[0].startswith("No run records the machine it ran on")
    assert render(report, "markdown").count("every run counts as one unknown machine") == 1
    js = report_json(report)
    made = [c for v in js["verdicts"] for c in v["comparisons"]] + [s["delta"] for s in js["steps"] if s["delta"]]
    assert made and {c["machines"] for c in made} == {"one_machine"}


def test_without_machines_every_decision_is_the_pooled_ones(h200, study):
    settings = settings_for(h200, study, prefer_results_profile=True)
    table = build_table(h200, "total_tps", settings.min_success_rate, settings.slo)
    for profile in h200.profiles_with_runs():
        cells = [c for c in table.on(profile) if c.eligible and c.values("total_tps")]
        if len(cells) < 2:
            continue
        values = {c.trial: c.values("total_tps") for c in cells}
        base = cells[0].trial
        blocked = compare_winner(values, baseline=base, blocks={c.trial: cell_blocks(c, "total_tps") for c in cells})
        pooled = compare_winner(values, baseline=base)
        assert [(c.b, c.decided.decision, c.p_adjusted) for c in blocked.comparisons] == \
            [(c.b, c.decided.decision, c.p_adjusted) for c in pooled.comparisons]
        assert [r.vs_leader_decision for r in blocked.ranking] == [r.vs_leader_decision for r in pooled.ranking]


# ------------------------------------------------------------------ the H200's runs, by Ray node


def test_two_trials_that_shared_a_machine_are_compared_on_its_runs_alone(h200):
    # sglang_running_512_radix_off: 7,582 on one node, 10,458 and 9,915 on another, where the SGLang
    # defaults also ran twice (issue 45: pooled, the first machine's run sat in the same sample).
    a = by_node(runs(h200, "sharegpt_synthetic", "sglang_running_512_radix_off"))
    b = by_node(runs(h200, "sharegpt_synthetic", "engine_sglang_default"))
    assert sorted(map(round, a["vm-8debdd06"])) == [9915, 10458] and set(a) & set(b) == {"vm-8debdd06"}
    d = blocked_difference(a, b)
    assert d.machines == "within" and (d.n_a, d.n_b) == (2, 2)
    assert "within machine vm-8debdd06" in d.machines_note and "left out: 1 run of a and 1 run of b" in d.machines_note
    alone = relative_difference(a["vm-8debdd06"], b["vm-8debdd06"], method="log")
    assert (d.relative, d.p_value) == pytest.approx((alone.relative, alone.p_value))
    # pooled, the 7,582 widens the sample: the within-machine test is the sharper one here
    pooled = relative_difference(tps(runs(h200, "sharegpt_synthetic", "sglang_running_512_radix_off")),
                                 tps(runs(h200, "sharegpt_synthetic", "engine_sglang_default")), method="log")
    assert d.p_value < pooled.p_value and d.relative != pytest.approx(pooled.relative)


def test_trials_of_different_machines_with_nothing_between_them_are_never_decided(h200):
    # The throughput profile: each trial's three runs on its own node, no node shared by two trials.
    a = by_node(runs(h200, "throughput", "step3_performance_mode"))
    b = by_node(runs(h200, "throughput", "engine_vllm_default"))
    assert len(a) == len(b) == 1 and set(a) != set(b)
    pooled = relative_difference(tps(runs(h200, "throughput", "step3_performance_mode")),
                                 tps(runs(h200, "throughput", "engine_vllm_default")), method="log")
    assert pooled.p_value < 0.05  # pooled, these would be "better"
    d = blocked_difference(a, b)
    assert d.machines == "no_shared_control" and d.cannot_tell and d.relative is None
    decided = decide(d, p_adjusted=d.p_value, alpha=0.05)
    assert decided.decision == "undecided" and decided.runs_each is None
    assert "across machines, no shared control" in decided.why and "vm-d0b66337" in decided.why


def test_the_report_says_which_comparisons_are_within_a_machine_and_which_across(h200, study):
    results = with_node_machines(h200)
    report = build_report(results, settings_for(results, study, prefer_results_profile=True))
    sel = report.selection
    seen = {c.machines for v in sel.verdicts for c in v.comparisons}
    seen |= {s.delta.machines for s in sel.steps if s.delta is not None}
    assert "no_shared_control" in seen
    for v in sel.verdicts:
        for c in v.comparisons:
            if c.machines == "no_shared_control":
                assert c.decision == "undecided" and c.p_value is None
    note = next(n for n in report.notes if "machines" in n)
    assert note.startswith(f"Runs come from {len({r.provenance.machine_key or 'unknown' for r in results.records if r.measured})} machines")
    text = render(report, "markdown")
    assert "cannot be decided, across machines, no shared control" in text
    js = report_json(report)
    assert {c["machines"] for v in js["verdicts"] for c in v["comparisons"]} == \
        {c.machines for v in sel.verdicts for c in v.comparisons}


# ------------------------------------------------------------------ real runs on a second machine, by construction


def test_through_a_control_a_machine_effect_cancels(h200):
    # Real runs (the H200's throughput profile, each trial on one node): b and a second copy of the
    # control moved to machine m2, 20 % slower. Through the control, a against b is what it was on one
    # machine; pooled, the machine would have been credited to a.
    a = tps(runs(h200, "throughput", "step3_performance_mode"))
    b = tps(runs(h200, "throughput", "engine_vllm_default"))
    c = tps(runs(h200, "throughput", "step1_quant_fp8") + runs(h200, "throughput", "sglang_quant_fp8"))
    slow = 0.8
    control = Control("control", {"control": {"m1": c, "m2": [v * slow for v in c]}})
    d = blocked_difference({"m1": a}, {"m2": [v * slow for v in b]}, controls=[control])
    true = relative_difference(a, b, method="log")
    assert d.machines == "via_control" and d.control == "control" and (d.n_a, d.n_b) == (3, 3)
    assert d.relative == pytest.approx(true.relative)
    # the variances of both terms add: a's and the control's on m1, b's and the control's on m2
    var = lambda x: np.var(np.log(x), ddof=1) / len(x)  # noqa: E731
    assert d.log_se ** 2 == pytest.approx(var(a) + var(c) + var(b) + var(c)) and d.log_se > true.log_se
    pooled = relative_difference(a, [v * slow for v in b], method="log")
    assert pooled.relative - true.relative > 0.2
    # the control's own runs never stand for a side: the baseline compared is bridged by its node controls
    assert Control("b", {"b": {"m1": b}}).without({"b"}) is None
    assert Control("b", {"b": {"m1": b}, "b@m2": {"m2": b}}).without({"b"}).blocks == {"m2": b}


def test_on_several_shared_machines_each_machine_difference_counts_not_the_pool(h200):
    # Unbalanced: a mostly on the fast machine, b mostly on the slow one (30 % slower), real runs.
    a = tps(runs(h200, "throughput", "step3_performance_mode"))
    b = tps(runs(h200, "throughput", "engine_vllm_default"))
    slow = 0.7
    a_blocks = {"m1": a, "m2": [a[0] * slow, a[1] * slow]}
    b_blocks = {"m1": [b[0], b[1]], "m2": [v * slow for v in b]}
    d = blocked_difference(a_blocks, b_blocks)
    assert d.machines == "within" and (d.n_a, d.n_b) == (5, 5) and "inverse variance" in d.machines_note
    true = relative_difference(a, b, method="log").relative
    assert d.relative == pytest.approx(true, abs=0.02)
    pooled = relative_difference([*a_blocks["m1"], *a_blocks["m2"]], [*b_blocks["m1"], *b_blocks["m2"]], method="log")
    assert abs(pooled.relative - true) > 0.05


def test_on_one_shared_machine_of_many_the_estimate_is_welchs_and_with_one_machine_it_is_unchanged(h200):
    a = tps(runs(h200, "throughput", "step3_performance_mode"))
    b = tps(runs(h200, "throughput", "engine_vllm_default"))
    one = blocked_difference({"m1": a}, {"m1": b})
    plain = relative_difference(a, b, method="log")
    assert one.machines == "one_machine" and one.model_dump(exclude={"machines", "machines_note"}) == \
        plain.model_dump(exclude={"machines", "machines_note"})
    # the stratified arithmetic with a single machine is Welch's exactly
    from farm.analysis.stats.blocks import _within

    est = _within({"m1": np.array(a)}, {"m1": np.array(b)})
    assert (est.d, est.se, est.df) == pytest.approx((plain.log_ratio, plain.log_se, plain.df))
    assert math.expm1(est.d) == pytest.approx(plain.relative)
