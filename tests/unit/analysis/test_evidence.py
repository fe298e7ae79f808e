"""Evidence in selection and report (issue 7): intervals, winner or tie, SLOs, one command across
workloads, node controls, edge warnings, Pareto fronts, and the seed's single runs. All on
constructed records with known answers; no engine runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm.analysis.records import results_from_data
from farm.report import EVIDENCE_CODES, build_report, render, report_for, report_json, write_plots
from farm.analysis.select import SelectionSettings, select
from farm.analysis.selection.models import StepDef
from farm.study.load import load_study
from farm.study.spec import SLOSpec
from conftest import SEED_FILE

REQUIRED = ["--ttft-ms=10"]


def runs_of(rid: str, flags: list[str], values: list[float], *, profile: str = "chat", ttft_p95: float = 100.0,
            tpot: float = 10.0, node: str | None = None, trial: str | None = None) -> list[dict]:
    """One run per value: total_tps = value, the rest consistent with it."""
    out = []
    for i, tps in enumerate(values):
        metrics = {"successful_requests": 100.0, "total_tps": float(tps), "output_tps": tps / 2,
                   "ttft_mean_ms": ttft_p95 / 2, "ttft_p95_ms": ttft_p95, "tpot_mean_ms": tpot,
                   "duration_s": 10.0, "total_input_tokens": tps * 5, "total_output_tokens": tps * 5}
        run = {"id": f"{rid}/{profile}/{i}", "trial": trial or rid, "engine": "mock", "model": "tiny",
               "flags": REQUIRED + flags, "profile": profile, "repeat": i, "metrics": metrics}
        if node:
            run["node"] = node
        out.append(run)
    return out


def results(*groups: list[dict], profiles=("chat",)):
    runs = [r for g in groups for r in g]
    return results_from_data({"profiles": {p: {"total_requests": 100} for p in profiles}, "runs": runs}, "constructed.json")


def settings(**kw) -> SelectionSettings:
    return SelectionSettings(primary_profile="chat", required_flags={"mock": REQUIRED}, engine_order=["mock"],
                             model_order=["tiny"], **kw)


# ------------------------------------------------------------------ winner, tie, simpler config


def test_equal_means_not_yet_proven_the_same_keep_the_leader_and_say_what_more_runs_would_buy():
    res = results(runs_of("base", [], [100, 102, 98]), runs_of("fancy", ["--itl-ms=1", "--workers=2"], [101, 99, 100.5]))
    sel = select(res, settings())
    v = sel.verdict()
    assert v.decision == "undecided" and v.winner is None
    assert sel.recommended.trial == "fancy" == sel.best_trial  # no longer "tied, so the simpler one"
    assert v.complexity == {"base": 0, "fancy": 2}
    lead = v.comparisons[0]
    assert lead.decision == "undecided" and lead.more_runs > 0
    text = render(build_report(res, settings()))
    assert "not decided yet on chat" in text and f"{lead.more_runs} more run" in text


def test_equal_means_proven_the_same_go_to_the_simpler_configuration_and_say_so():
    res = results(runs_of("base", [], [100, 100.4, 99.6, 100.2, 99.8]),
                  runs_of("fancy", ["--itl-ms=1", "--workers=2"], [100.3, 100.1, 99.9, 100.5, 100.2]))
    sel = select(res, settings())
    v = sel.verdict()
    assert (v.decision, v.leader, sel.recommended.trial) == ("equivalent", "fancy", "base")
    assert v.equivalent == ["fancy", "base"] and v.comparisons[0].decision == "equivalent"
    text = render(build_report(res, settings()))
    assert "the simplest of the trials proven equivalent (within ±3 %) to the best" in text
    assert "fancy and base are equivalent within ±3 %" in text and "tie" not in text.split("## ")[0]


def test_a_ten_percent_lead_with_small_noise_is_a_winner():
    res = results(runs_of("base", [], [100, 101, 99, 100]), runs_of("fast", ["--itl-ms=1"], [110, 111, 109, 110]))
    sel = select(res, settings())
    v = sel.verdict()
    assert (v.decision, v.winner, sel.recommended.trial) == ("winner", "fast", "fast")
    lead = v.comparisons[0]
    assert lead.roles == ["runner_up", "baseline"] and lead.significant and lead.decision == "better"
    assert 5 < lead.ci_low_pct < 10 < lead.ci_high_pct < 15
    row = sel.comparison[0]
    assert row.delta.significant and row.delta.ci_low_pct > 0 and row.delta.decision == "better"
    text = render(build_report(res, settings()))
    assert "Evidence: fast wins on chat" in text and "Holm" in text and "fast is better than base" in text


def test_an_undecided_lead_is_not_given_to_a_simpler_trial_only_not_yet_separated():
    # The complex trial leads by 2 % but its runs spread by 8 %: undecided. The old rule called all
    # three "tied" and recommended the simplest; nothing here says they are the same.
    res = results(runs_of("base", [], [100, 97, 103]), runs_of("simple", ["--itl-ms=2"], [104, 98, 101]),
                  runs_of("complex", ["--itl-ms=1", "--workers=4"], [110, 96, 102]))
    sel = select(res, settings())
    v = sel.verdict()
    assert v.decision == "undecided" and v.leader == "complex" == sel.recommended.trial
    assert v.equivalent == ["complex"]
    rep = build_report(res, settings())
    assert rep.selection.comparison[0].delta.decision == "undecided"
    assert "cannot tell yet" in render(rep)


def test_a_trial_significantly_below_the_leader_is_decided_and_never_recommended():
    res = results(runs_of("base", [], [80, 81, 79]), runs_of("mid", ["--itl-ms=2"], [99, 101, 100]),
                  runs_of("top", ["--itl-ms=1", "--workers=4"], [101, 99, 102]))
    v = select(res, settings()).verdict()
    assert v.decision == "undecided" and "base" not in v.equivalent
    assert {c.b: c.decision for c in v.comparisons} == {"mid": "undecided", "base": "better"}
    assert v.recommended == "top"


def test_statistics_of_every_trial_and_profile_are_in_the_json():
    res = results(runs_of("base", [], [100, 101, 99]), runs_of("fast", ["--itl-ms=1"], [110, 111, 109]))
    data = report_json(build_report(res, settings()))
    row = next(t for t in data["trials"] if t["id"] == "fast")
    assert set(row["stats"]) == {"total_tps", "output_tps", "ttft_mean_ms", "tpot_mean_ms"}
    tps = row["stats"]["total_tps"]
    assert tps["n"] == 3 and tps["mean"] == pytest.approx(110) and tps["ci_low"] < 110 < tps["ci_high"]
    assert data["verdicts"][0]["decision"] == "winner" and data["alpha"] == 0.05
    assert data["comparison"][0]["delta"]["significant"] is True
    # issue 3's keys are all still there
    assert {"id", "engine", "model", "flags", "profile", "total_tps", "success_rate", "eligible", "reason"} <= set(row)


# ------------------------------------------------------------------ SLOs


def test_a_trial_that_breaks_an_slo_is_not_eligible_with_the_reason_shown():
    res = results(runs_of("base", [], [100, 101, 99], ttft_p95=200),
                  runs_of("greedy", ["--itl-ms=1"], [150, 151, 149], ttft_p95=450),
                  runs_of("fast", ["--itl-ms=2"], [120, 121, 119], ttft_p95=250))
    s = settings(slo={"chat": SLOSpec(ttft_p95_ms_max=300)})
    sel = select(res, s)
    rows = {t.id: t for t in sel.trials}
    assert not rows["greedy"].eligible
    assert rows["greedy"].reason == "SLO: P95 TTFT 450.00 ms (mean of 3 runs) > 300 ms"
    assert rows["greedy"].slo_broken == ["P95 TTFT 450.00 ms (mean of 3 runs) > 300 ms"]
    assert sel.recommended.trial == "fast" and sel.verdict().decision == "winner"
    text = render(build_report(res, s))
    assert "no: SLO: P95 TTFT 450.00 ms" in text and "P95 TTFT <= 300 ms" in text


def test_slo_success_rate_and_tpot_limits():
    low = runs_of("flaky", ["--itl-ms=1"], [150, 151, 149])
    low[1]["metrics"]["successful_requests"] = 95.0
    res = results(runs_of("base", [], [100, 101, 99], tpot=30), low, runs_of("ok", ["--itl-ms=2"], [120, 121, 119]))
    sel = select(res, settings(slo={"chat": SLOSpec(tpot_mean_ms_max=20, min_success_rate=0.97)}))
    rows = {t.id: t for t in sel.trials}
    assert rows["flaky"].reason.startswith("SLO: lowest success rate of its runs 95 % < 97 %")
    assert rows["base"].reason == "SLO: mean TPOT 30.00 ms (mean of 3 runs) > 20 ms"
    assert sel.recommended.trial == "ok"


def test_slo_in_the_study_file_is_validated(tmp_path):
    from farm.errors import SpecError

    study = tmp_path / "s.yaml"
    study.write_text("include: [%s]\nname: s\nprimary_profile: smoke_chat\nprofiles:\n  smoke_chat:\n"
                     "    data: {kind: synthetic, prompt_tokens: 8, output_tokens: 8}\n    requests: 4\n"
                     "    slo: {goodput: true}\n" % (Path(__file__).parents[3] / "configs" / "smoke.yaml"))
    with pytest.raises(SpecError, match="slo"):
        load_study(study)


# ------------------------------------------------------------------ one command across workloads


def test_the_best_worst_case_configuration_across_profiles_and_its_cost():
    # chat_king wins chat by far but loses on gen; allround is good on both.
    res = results(runs_of("base", [], [100, 101, 99]), runs_of("base", [], [100, 101, 99], profile="gen"),
                  runs_of("chat_king", ["--itl-ms=1"], [140, 141, 139]),
                  runs_of("chat_king", ["--itl-ms=1"], [90, 91, 89], profile="gen"),
                  runs_of("allround", ["--itl-ms=2"], [125, 126, 124]),
                  runs_of("allround", ["--itl-ms=2"], [120, 121, 119], profile="gen"),
                  profiles=("chat", "gen"))
    sel = select(res, settings())
    assert sel.recommended.trial == "chat_king"
    cp = sel.cross_profile
    assert cp.recommended == "allround" and cp.worst_profile == "gen"
    assert cp.worst_case_pct == pytest.approx(20.0) and cp.geomean_pct == pytest.approx((1.25 * 1.2) ** 0.5 * 100 - 100)
    costs = {c.profile: c for c in cp.costs}
    # the ratio of the geometric means, close to that of the means with 1 % noise
    assert costs["chat"].winner == "chat_king" and costs["chat"].cost.relative_pct == pytest.approx(125 / 140 * 100 - 100, abs=0.01)
    assert costs["chat"].cost.significant and costs["chat"].cost.ci_high_pct < 0
    assert costs["gen"].winner == "allround" and costs["gen"].cost.a == costs["gen"].cost.b
    assert [r.trial for r in cp.ranking if r.comparable][:2] == ["allround", "base"]
    data = report_json(build_report(res, settings()))
    assert data["cross_profile"]["recommended"] == "allround"
    rep = build_report(res, settings())
    text = render(rep)
    assert "One command for all workloads" in text and "at worst +20.00 % (on gen)" in text
    [slower] = [w for w in rep.warnings if w.code == "regression"]
    assert slower.profile == "gen" and "-10.00 %" in slower.message and "allround is the best worst case" in slower.message


def test_a_trial_not_eligible_on_every_profile_cannot_be_the_one_command():
    res = results(runs_of("base", [], [100, 101, 99]), runs_of("base", [], [100, 101, 99], profile="gen"),
                  runs_of("chat_only", ["--itl-ms=1"], [140, 141, 139]), profiles=("chat", "gen"))
    cp = select(res, settings()).cross_profile
    assert cp.recommended == "base"
    assert next(r for r in cp.ranking if r.trial == "chat_only").missing_profiles == ["gen"]


# ------------------------------------------------------------------ node controls, edges, Pareto


def test_node_controls_are_reported_per_node_and_never_ranked():
    res = results(runs_of("base", [], [100, 101, 99], node="n1"),
                  runs_of("base@n2", [], [120, 121, 119], node="n2", trial="base@n2"),
                  runs_of("fast", ["--itl-ms=1"], [110, 111, 109], node="n1"))
    sel = select(res, settings())
    assert sel.baseline.trial == "base"
    assert sel.recommended.trial == "fast" and "base@n2" not in sel.verdict().equivalent
    control = next(t for t in sel.trials if t.id == "base@n2")
    assert control.node_control_of == "base" and not control.eligible and "node control" in control.reason
    assert sel.nodes.effect and [n.node for n in sel.nodes.nodes] == ["n1", "n2"]
    rep = build_report(res, settings())
    assert [w.code for w in rep.warnings if w.code == "node_effect"]
    assert "Nodes: the baseline on every node" in render(rep)


def test_edge_of_range_names_the_next_value_to_try():
    res = results(runs_of("base", [], [100, 101, 99]),
                  *[runs_of(f"seqs{n}", [f"--max-num-seqs={n}"], [100 + n / 8, 101 + n / 8, 99 + n / 8]) for n in (64, 128, 256)])
    rep = build_report(res, settings())
    [edge] = rep.selection.edges
    assert (edge.knob, edge.best_value, edge.next_value) == ("--max-num-seqs", 256, 512)
    w = [w for w in rep.warnings if w.code == "edge_of_range"]
    assert len(w) == 1 and "try 512" in w[0].message


def test_pareto_front_per_profile():
    res = results(runs_of("base", [], [100, 101, 99], tpot=10), runs_of("fast", ["--itl-ms=1"], [150, 151, 149], tpot=20),
                  runs_of("dominated", ["--itl-ms=2"], [90, 91, 89], tpot=25))
    assert select(res, settings()).pareto == {"chat": ["base", "fast"]}


def test_every_evidence_code_is_reachable():
    res = results(runs_of("base", [], [80, 81, 79], node="n1"),
                  runs_of("base@n2", [], [120, 121, 119], node="n2", trial="base@n2"),
                  runs_of("noisy", ["--max-num-seqs=64"], [100, 80, 125]),
                  runs_of("more", ["--max-num-seqs=128"], [102, 103, 101]),
                  # on a second profile the recommendation gains nothing measurable
                  runs_of("base", [], [100, 101, 99], profile="gen"),
                  runs_of("more", ["--max-num-seqs=128"], [100.5, 99.5, 101], profile="gen"), profiles=("chat", "gen"))
    seed = report_for(results_from_data(json.loads(SEED_FILE.read_text()), str(SEED_FILE)), load_study())
    slower = results(runs_of("base", [], [100, 101, 99]), runs_of("fast", ["--itl-ms=1"], [140, 141, 139]),
                     runs_of("base", [], [100, 101, 99], profile="gen"),
                     runs_of("fast", ["--itl-ms=1"], [90, 91, 89], profile="gen"), profiles=("chat", "gen"))
    # stepwise keeps the baseline (its one step is slower), while another trial is significantly faster
    stuck = results(runs_of("base", [], [100, 101, 99]), runs_of("step", ["--itl-ms=1"], [95, 96, 94]),
                    runs_of("other", ["--itl-ms=2"], [130, 131, 129]))
    steps = settings(steps=[StepDef(name="base", engine="mock", model="tiny", flags={"ttft-ms": "10"}),
                            StepDef(name="step", engine="mock", model="tiny", flags={"ttft-ms": "10", "itl-ms": "1"},
                                    after="base")])
    # one engine start's runs in order: a first run far below the rest, and a steady drift down
    ordered = results(runs_of("base", [], [80, 100, 101, 99, 100]), runs_of("fast", ["--itl-ms=1"], [130, 126, 122, 118, 114]))
    codes = ({w.code for w in build_report(res, settings()).warnings} | {w.code for w in seed.warnings}
             | {w.code for w in build_report(slower, settings()).warnings}
             | {w.code for w in build_report(stuck, steps, "stepwise").warnings}
             | {w.code for w in build_report(ordered, settings()).warnings})
    assert set(EVIDENCE_CODES) <= codes


def test_plots_carry_intervals_and_the_pareto_front(tmp_path):
    res = results(runs_of("base", [], [100, 101, 99]), runs_of("fast", ["--itl-ms=1"], [110, 111, 109], tpot=12))
    paths = write_plots(build_report(res, settings()), tmp_path)
    assert [p.name for p in paths] == ["total_tps_by_profile.png", "tps_vs_tpot.png"]
    assert all(p.stat().st_size > 10_000 for p in paths)


# ------------------------------------------------------------------ the seed, replayed


@pytest.mark.parametrize("strategy", ["best", "stepwise"])
def test_seed_replay_still_reaches_the_seeds_command_and_says_single_runs_cannot_separate_steps_2_to_4(strategy):
    data = json.loads(SEED_FILE.read_text())
    rep = report_for(results_from_data(data, str(SEED_FILE)), load_study(), strategy=strategy)
    assert rep.selection.recommended.command == data["recommended_command"]
    assert rep.selection.verdict().decision == "cannot_tell"
    assert rep.selection.unseparated == ["step2_prefix_cache", "step3_performance_mode", "step4_kv_cache_fp8"]
    [w] = [w for w in rep.warnings if w.code == "cannot_separate"]
    assert "single runs cannot separate step2_prefix_cache, step3_performance_mode and step4_kv_cache_fp8" in w.message
    assert "step1_quant_fp8" not in w.message
    steps = {s.step: s for s in rep.selection.steps}
    assert all(steps[n].significance == "cannot_tell" for n in
               ("step2_prefix_cache", "step3_performance_mode", "step4_kv_cache_fp8"))
    text = render(rep)
    assert "cannot tell on sharegpt" in text and "cannot tell (single runs)" in text


# ------------------------------------------------------------------ guidellm goodput


def test_goodput_slos_go_to_guidellm_and_come_back_in_the_metrics():
    from actors.bench_client import scenario_spec
    from farm.analysis.results import parse_report
    from farm.study.spec import DataSpec, ProfileSpec

    slo = SLOSpec(ttft_p95_ms_max=300, tpot_mean_ms_max=20, goodput=True)
    profile = ProfileSpec(data=DataSpec(kind="synthetic", prompt_tokens=8, output_tokens=8), requests=4, slo=slo)
    spec = scenario_spec(profile, target="http://127.0.0.1:1", model="m", tokenizer="t", output=Path("/tmp/x.json"))
    assert spec["metrics"] == {"kind": "generative", "slo": {"ttft_ms": 300.0, "tpot_ms": 20.0}}
    without = profile.model_copy(update={"slo": slo.model_copy(update={"goodput": False})})
    assert "metrics" not in scenario_spec(without, target="x", model="m", tokenizer="t", output=Path("/tmp/x.json"))

    raw = json.loads((Path(__file__).parents[2] / "fixtures" / "guidellm-0.8.1-mock-report.json").read_text())
    assert parse_report(raw)[0].slo_attainment is None
    raw["benchmarks"][-1]["metrics"].update(slo_attainment=0.875, request_goodput={"successful": {"mean": 3.5}})
    metrics = parse_report(raw)[0]
    assert (metrics.slo_attainment, metrics.goodput_rps) == (0.875, 3.5)
