"""Planning (pure): `--repeats auto` passes, the baseline on every node, merging a later pass."""

from __future__ import annotations

import pytest

from farm.analysis import plan
from farm.study.grid import expand
from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.study.load import load_study
from farm.study.trial import Trial


def test_repeats_parse_and_alpha():
    assert plan.parse_repeats("auto") == "auto" and plan.parse_repeats("3") == 3
    for bad in ("0", "-1", "many", ""):
        with pytest.raises(ValueError, match="whole number >= 1 or 'auto'"):
            plan.parse_repeats(bad)
    assert plan.first_pass_repeats("auto") == plan.AUTO_FIRST_PASS and plan.first_pass_repeats(5) == 5
    # fixed repeats look once at 5 %; auto's looks share 5 % (tests/unit/study/test_repeats.py)
    assert plan.alpha_for(3) == 0.05 and plan.alpha_for("auto", 1, 2) < plan.alpha_for("auto", 2, 2) < 0.05


# ------------------------------------------------------------------ --repeats auto


COST = {"a": 2, "b": 2, "c": 2}


def test_a_separated_ranking_needs_no_further_pass():
    # the first look of a plan of two (alpha 0.0113): 10 % apart at a 1 % CV is decided with 3 runs each
    p = plan.next_pass({"a": [110, 111, 109], "b": [100, 101, 99]}, cost_per_repeat=COST, passes_done=1, spent=12,
                       budget=100, max_passes=2)
    assert p.done and p.reason.startswith("every decision made") and "b below it" in p.reason


def test_undecided_trials_and_the_leader_get_more_repeats_the_decided_ones_do_not():
    p = plan.next_pass({"a": [104, 98, 101], "b": [100, 103, 97], "c": [80, 81, 79]}, cost_per_repeat=COST,
                       passes_done=1, spent=18, budget=100, max_passes=2)
    assert not p.done and p.trials == ["a", "b"] and p.repeats == plan.AUTO_STEP
    assert p.runs == 2 * plan.AUTO_STEP * 2 and p.pass_index == 2
    assert p.reason.startswith("1 decision(s) open") and "a vs b" in p.reason and "more runs each" in p.reason


def test_a_trial_proven_equivalent_to_the_leader_needs_no_more_runs():
    close = {"a": [100.3, 100.1, 99.9, 100.5, 100.2], "b": [100, 100.4, 99.6, 100.2, 99.8]}
    p = plan.next_pass(close, cost_per_repeat=COST, passes_done=2, spent=10, budget=100, alpha=0.05)
    assert p.done and "every decision made" in p.reason and "b equivalent to it" in p.reason
    # the same pair with the margin made too narrow for its noise stays open
    narrow = plan.next_pass(close, cost_per_repeat=COST, passes_done=2, spent=10, budget=100, alpha=0.05, margin=0.002)
    assert not narrow.done and narrow.trials == ["a", "b"]


def test_the_budget_and_the_look_limit_end_the_loop():
    overlapping = {"a": [104, 98, 101], "b": [100, 103, 97]}
    spent = plan.next_pass(overlapping, cost_per_repeat=COST, passes_done=1, spent=98, budget=100)
    assert spent.done and "run budget spent: 98 of 100" in spent.reason
    looks = plan.next_pass(overlapping, cost_per_repeat=COST, passes_done=plan.AUTO_MAX_PASSES, spent=0, budget=100)
    assert looks.done and "looks taken" in looks.reason
    # the leader fits but no contender does: nothing to separate it from
    tight = plan.next_pass(overlapping, cost_per_repeat={"a": 1, "b": 10}, passes_done=1, spent=90, budget=100)
    assert tight.done and "no undecided trial fits" in tight.reason
    # whatever ends the loop, its reason names the decisions still open
    assert all("still open: a vs b" in p.reason for p in (spent, looks, tight))
    assert plan.default_budget(None, 24) == 72 and plan.default_budget(50, 24) == 50


def _ratio_samples(ratio: float, cv: float, n: int) -> list[float]:
    """n values whose logs have exactly this spread, centred on log(100 * ratio)."""
    import numpy as np

    z = np.linspace(-1, 1, n)
    z = (z - z.mean()) / z.std(ddof=1)
    return list(np.exp(np.log(100 * ratio) + cv * z))


def test_each_look_is_judged_at_its_own_level_the_last_near_five_percent():
    # 5 runs each, +3.5 % at a 2 % CV: Welch p about 0.02 on the logs
    close = {"a": _ratio_samples(1.035, 0.02, 5), "b": _ratio_samples(1.0, 0.02, 5)}
    last = plan.next_pass(close, cost_per_repeat=COST, passes_done=2, spent=10, budget=10, max_passes=2)
    assert last.done and "every decision made" in last.reason and "b below it" in last.reason
    assert f"\u03b1 {plan.alpha_for('auto', 2, 2):.3g} at look 2 of 2" in last.reason
    # at the first look of the same plan, or under the old 0.01 a look, the same runs decide nothing
    first = plan.next_pass(close, cost_per_repeat=COST, passes_done=1, spent=10, budget=100, max_passes=2)
    assert not first.done and first.trials == ["a", "b"] and "look 1 of 2" in first.reason
    old = plan.next_pass(close, cost_per_repeat=COST, passes_done=2, spent=10, budget=100, alpha=0.01)
    assert not old.done


def _stored(values: dict[str, list[tuple[float, int]]]) -> list[TrialResult]:
    """Stored trials of one profile `p`: per trial its runs' (throughput, pass)."""
    out = []
    for k, (name, runs) in enumerate(values.items()):
        trial = Trial(id=f"mock-{name}", name=name, engine="mock", model_key="tiny", model="farm-tiny",
                      tokenizer="farm:tiny", profiles=["p"], index=k)
        out.append(TrialResult(sweep_id="s", trial=trial, status=Status.ok, node="n1", runs=[
            ProfileRun(profile="p", repeat=i, status=Status.ok, metrics=_metrics(v), pass_index=pi)
            for i, (v, pi) in enumerate(runs)]))
    return out


def _auto_study(max_runs=None, first_pass=None):
    from farm.study.spec import DataSpec, EngineSpec, GridBlock, GridSpec, ModelSpec, ProfileSpec, Study

    profile = ProfileSpec(data=DataSpec(kind="synthetic", prompt_tokens=32, output_tokens=16), requests=10,
                          rate=1000, max_concurrency=8)
    return Study(name="auto", models={"tiny": ModelSpec(name="farm-tiny", tokenizer="farm:tiny")},
                 engines={"mock": EngineSpec()}, profiles={"p": profile},
                 grids={"g": GridSpec(blocks=[GridBlock(engine="mock", models=["tiny"],
                                                        profile_repeats={"p": first_pass} if first_pass else {})])},
                 primary_profile="p", repeats="auto", max_runs=max_runs)


def test_a_sweep_and_its_report_judge_the_same_look_at_the_same_level():
    from farm.analysis.records import records_from_trials
    from farm.analysis.select import settings_for

    a, b = _ratio_samples(1.035, 0.02, 5), _ratio_samples(1.0, 0.02, 5)
    study = _auto_study(max_runs=10)  # two trials, 5 runs each at most: looks at 3 and 5
    first = _stored({"a": [(v, 1) for v in a[:3]], "b": [(v, 1) for v in b[:3]]})
    p = plan.pass_from_stored(first, study, "g", "s")
    assert not p.done and p.pass_index == 2 and f"\u03b1 {plan.alpha_for('auto', 1, 2):.3g} at look 1 of 2" in p.reason
    both = _stored({"a": [(v, 1 if i < 3 else 2) for i, v in enumerate(a)],
                    "b": [(v, 1 if i < 3 else 2) for i, v in enumerate(b)]})
    done = plan.pass_from_stored(both, study, "g", "s")
    assert done.done and "look 2 of 2" in done.reason and "b below it" in done.reason
    # the report of those runs judges them at the level of the look they reached
    records = records_from_trials(both, study, grid="g", sweep_id="s")
    assert settings_for(records, study, grid="g").alpha == plan.alpha_for("auto", 2, 2)
    # the default budget (18 runs) plans four looks: its second is stricter, and the decision stays open
    default = plan.pass_from_stored(both, _auto_study(), "g", "s")
    assert not default.done and "look 2 of 4" in default.reason


def test_a_first_pass_of_five_runs_each_is_the_first_look_not_the_second():
    """A block's `profile_repeats` may give the primary profile more runs in the first pass than
    `AUTO_FIRST_PASS` (5): those runs are the first look, judged at the first look's level by the
    plan and the report alike, and the looks are planned from 5 runs each (5, 7, 9 for 18 runs of
    two). Counted from 3 runs, they were the second look of four, and the plan said look 1."""
    from farm.analysis.records import records_from_trials
    from farm.analysis.select import settings_for

    a, b = _ratio_samples(1.02, 0.02, 5), _ratio_samples(1.0, 0.02, 5)
    study = _auto_study(max_runs=18, first_pass=5)
    first = _stored({"a": [(v, 1) for v in a], "b": [(v, 1) for v in b]})
    level = plan.alpha_for("auto", 1, 3, first_pass=5)
    assert level != plan.alpha_for("auto", 2, 4)  # the level counting from 3 runs gave these runs
    records = records_from_trials(first, study, grid="g", sweep_id="s")
    assert settings_for(records, study, grid="g").alpha == level
    p = plan.pass_from_stored(first, study, "g", "s")
    assert f"\u03b1 {level:.3g} at look 1 of 3" in p.reason


def test_a_sweep_stored_under_the_old_rule_resumes_under_the_new_one():
    """Sweeps run before the alpha-spending rule stored no alpha (it was 0.01 a look, a constant):
    their runs read as they are, their looks are counted from the runs, and a pass that ran to its
    end under the old rule is not taken for one stopped part-way."""
    study = _auto_study()
    # c was 8 % below at the first look: decided at 0.01, so the old rule's pass 2 ran a and b alone
    a, b = _ratio_samples(1.02, 0.015, 5), _ratio_samples(1.0, 0.015, 5)
    c = _ratio_samples(0.92, 0.01, 3)
    stored = _stored({"a": [(v, 1 if i < 3 else 2) for i, v in enumerate(a)],
                      "b": [(v, 1 if i < 3 else 2) for i, v in enumerate(b)], "c": [(v, 1) for v in c]})
    before = plan.pass_from_stored(stored, study, "g", "s", before=2)
    assert "mock-c" in before.trials  # the new rule's first look (of five) would have kept c open
    assert plan.unfinished_pass(stored, study, "g", "s") is None
    nxt = plan.pass_from_stored(stored, study, "g", "s")
    assert nxt.pass_index == 3 and "look 2 of 5" in nxt.reason


def test_a_single_candidate_needs_nothing():
    assert plan.next_pass({"a": [1, 2, 3]}, cost_per_repeat=COST, passes_done=1, spent=3, budget=9).done


# ------------------------------------------------------------------ the baseline on every node


def _nodes(*specs):
    return [{"NodeID": f"{i + 1:x}f3a9c{i:050d}", "NodeManagerHostname": host, "Alive": True, "Resources": {"GPU": g, "CPU": 8}}
            for i, (host, g) in enumerate(specs)]


def test_the_baseline_runs_once_more_on_every_node_able_to_run_it():
    study = load_study()
    trials = expand(study, "seed")
    base = plan.baseline_trial(study, trials)
    assert base.name == "engine_vllm_default"
    nodes = plan.node_names(_nodes(("head", 0), ("gpu-a.example.org", 8), ("gpu-b", 8)))
    copies = plan.node_baselines(base, nodes, first_index=100)
    assert [t.id for t, _ in copies] == [f"{base.id}@gpu-a", f"{base.id}@gpu-b"]  # not on the GPU-less head
    assert [t.name for t, _ in copies] == ["engine_vllm_default@gpu-a", "engine_vllm_default@gpu-b"]
    assert [t.index for t, _ in copies] == [100, 101] and all(plan.control_of(t.id) == base.id for t, _ in copies)
    assert plan.control_of(base.id) is None
    # one node able to run trials: nothing to compare, no extra trial
    assert plan.node_baselines(base, plan.node_names(_nodes(("head", 0), ("gpu-a", 8))), first_index=100) == []


def test_node_controls_keep_to_the_studys_gpu_model():
    study = load_study()
    base = plan.baseline_trial(study, expand(study, "seed"))
    nodes = _nodes(("h200-a", 8), ("h200-b", 8), ("a100", 8))
    for n, accel in zip(nodes, ("H200", "H200", "A100")):
        n["Resources"][f"accelerator_type:{accel}"] = 1
    copies = plan.node_baselines(base, plan.node_names(nodes), first_index=100, accelerator_type="H200")
    assert [n.name for _, n in copies] == ["h200-a", "h200-b"]


def test_nodes_sharing_a_hostname_get_unique_names():
    names = [n.name for n in plan.node_names(_nodes(("box", 0), ("box", 0)))]
    assert names == ["box-1f3a9c00", "box-2f3a9c00"]


def test_the_study_baseline_wins_over_the_engine_default():
    study = load_study()
    trials = expand(study, "seed")
    named = study.model_copy(update={"baseline": "step1_quant_fp8"})
    assert plan.baseline_trial(named, trials).name == "step1_quant_fp8"


# ------------------------------------------------------------------ merging a later pass


def _metrics(tps: float) -> RunMetrics:
    return RunMetrics(successful_requests=10, total_requests=10, success_rate=1, duration_s=1, total_input_tokens=tps / 2,
                      total_output_tokens=tps / 2, request_throughput=10, output_tps=tps / 2, total_tps=tps)


def _result(repeats: list[int], node: str, status: Status = Status.ok) -> TrialResult:
    trial = Trial(id="mock-1", engine="mock", model_key="tiny", model="tiny", profiles=["p", "q"])
    runs = [ProfileRun(profile=p, repeat=r, status=Status.ok, metrics=_metrics(100 + r)) for r in repeats for p in ("p", "q")]
    return TrialResult(sweep_id="s", trial=trial, status=status, runs=runs, node=node, finished_at=float(len(repeats)))


def test_a_later_pass_continues_the_repeats_and_keeps_its_node():
    merged = plan.merge_pass(_result([0, 1, 2], "n1"), _result([0, 1], "n2"), pass_index=2)
    assert [(r.profile, r.repeat, r.pass_index, r.node) for r in merged.runs if r.profile == "p"] == [
        ("p", 0, 1, "n1"), ("p", 1, 1, "n1"), ("p", 2, 1, "n1"), ("p", 3, 2, "n2"), ("p", 4, 2, "n2")]
    assert merged.status == Status.ok and plan.next_repeat(merged) == 5


def test_a_failed_later_pass_shows_in_the_trials_status():
    bad = _result([0], "n2", Status.oom).model_copy(update={"reason": "CUDA out of memory"})
    merged = plan.merge_pass(_result([0, 1, 2], "n1"), bad, pass_index=2)
    assert merged.status == Status.oom and merged.reason == "pass 2: CUDA out of memory"


def test_a_later_pass_runs_the_primary_profile_alone_and_its_repeats_continue_there():
    first = _result([0], "n1")
    first = first.model_copy(update={"runs": first.runs + [
        ProfileRun(profile="q", repeat=r, status=Status.ok, metrics=_metrics(100)) for r in (1, 2)]})
    later = plan.pass_trial(first.trial, "p")
    assert later.profiles == ["p"] and later.id == first.trial.id
    new = TrialResult(sweep_id="s", trial=later, status=Status.ok, node="n2", runs=[
        ProfileRun(profile="p", repeat=r, status=Status.ok, metrics=_metrics(200)) for r in (0, 1)])
    merged = plan.merge_pass(first, new, pass_index=2)
    assert [(r.repeat, r.pass_index) for r in merged.runs if r.profile == "p"] == [(0, 1), (1, 2), (2, 2)]
    assert [r.repeat for r in merged.runs if r.profile == "q"] == [0, 1, 2]  # untouched by the pass
    assert merged.trial.profiles == ["p", "q"]  # the trial is still the whole trial


def test_a_pass_of_a_trial_without_the_primary_profile_keeps_its_own():
    trial = Trial(id="mock-1", engine="mock", model_key="tiny", model="tiny", profiles=["q"])
    assert plan.pass_trial(trial, "p").profiles == ["q"]


def test_each_runs_provenance_names_the_engine_start_that_served_it():
    """A later pass starts the engine again (on the H200 the baseline's pass 2 started cold in 169 s
    of engine init, its first pass in 251 s): each run's provenance carries its own pass's start,
    and a later pass stored without its start's facts (before spans carried them) says none rather
    than the first pass's."""
    from farm.analysis.halving import Rung, merge_rung
    from farm.analysis.records import provenance_of

    def started(result: TrialResult, ready: float, hit: bool, at: float) -> TrialResult:
        return result.model_copy(update={"engine_reported": {"ready_s": ready, "compile_cache_hit": hit},
                                         "started_at": at, "finished_at": at + 500})

    first = started(_result([0], "n1"), 251.0, False, 0.0)
    merged = plan.merge_pass(first, started(_result([0, 1], "n2"), 169.0, True, 1000.0), pass_index=2)
    by_pass = {r.pass_index: provenance_of(merged, r.started_at, r.finished_at, r.pass_index) for r in merged.runs}
    assert (by_pass[1].engine_start_s, by_pass[1].engine_start_cold) == (251.0, True)
    assert (by_pass[2].engine_start_s, by_pass[2].engine_start_cold) == (169.0, False)
    assert merged.engine_reported["ready_s"] == 251.0  # the trial's own facts stay its first start's

    # stored before spans carried a start: the later pass's runs have none, not the first pass's
    legacy = merged.model_copy(update={"spans": [s.model_copy(update={"engine_reported": None})
                                                 for s in merged.spans]})
    assert provenance_of(legacy, None, None, 2).engine_start_s is None
    assert provenance_of(legacy, None, None, 1).engine_start_s == 251.0

    # a halving rung: the first rung's runs keep the first start though the trial's facts take the later one's
    rung = Rung(index=2, profiles={"p": "p"}, requests={"p": 10}, repeats=2, alpha=0.05, primary="p")
    halved = merge_rung(first, started(_result([0, 1], "n1"), 90.0, True, 2000.0), rung)
    assert provenance_of(halved, None, None, 1).engine_start_s == 251.0
    assert provenance_of(halved, None, None, 2).engine_start_s == 90.0


def test_runs_on_machines_of_one_hostname_are_told_apart_by_their_node_id():
    """Every lent H200 is called 'vm': a trial's first pass on one machine and its later pass on
    another are named with their Ray node ids, and a first-pass run keeps its trial's node."""
    from farm.analysis.records import records_from_trials

    study = load_study()

    def on(node_id: str, repeats: list[int], name: str = "mock-1") -> TrialResult:
        result = _result(repeats, "vm").model_copy(update={"node_id": node_id})
        return result.model_copy(update={"trial": result.trial.model_copy(update={"id": name})})

    merged = plan.merge_pass(on("aaaaaaaa11", [0]), on("cccccccc33", [0, 1]), pass_index=2)
    other = on("bbbbbbbb22", [0], name="mock-2")
    nodes = {(r.trial, r.profile, r.repeat): r.node for r in records_from_trials([merged, other], study).records}
    assert nodes[("mock-1", "p", 0)] == "vm-aaaaaaaa" and nodes[("mock-1", "q", 0)] == "vm-aaaaaaaa"
    assert nodes[("mock-1", "p", 1)] == nodes[("mock-1", "p", 2)] == "vm-cccccccc"
    assert nodes[("mock-2", "p", 0)] == "vm-bbbbbbbb"

    # stored before runs carried a node id: the first pass's runs, stamped 'vm', keep the trial's node
    legacy = merged.model_copy(update={"runs": [r.model_copy(update={"node_id": None}) for r in merged.runs]})
    nodes = {(r.trial, r.profile, r.repeat): r.node for r in records_from_trials([legacy, other], study).records}
    assert nodes[("mock-1", "p", 0)] == "vm-aaaaaaaa" and nodes[("mock-1", "p", 1)] == "vm"


def test_the_committed_vllm_cpu_auto_run_is_judged_at_its_second_look_and_decided():
    """bench/vllm-cpu/decisive: `--repeats auto` on vLLM's CPU build, --max-num-seqs 16 against 1,
    real runs. Its default budget (3 x 16 first-pass runs) plans five looks; after pass 2 (5 runs
    each on `generation`) its report judges the second look's level, at which 16 is better."""
    from pathlib import Path

    from farm.analysis.results_file import read_results_file
    from farm.analysis.select import select, settings_for
    from farm.study.load import load_study

    repo = Path(__file__).resolve().parents[3]
    results = read_results_file(repo / "bench/vllm-cpu/decisive/auto/results.json")
    study = load_study(repo / "configs/tiny-vllm-cpu.yaml").model_copy(update={"repeats": "auto"})
    settings = settings_for(results, study, grid="ci")
    assert settings.alpha == plan.alpha_for("auto", 2, 5) and settings.alpha > 0.0035
    v = select(results, settings).verdict()
    names = {r.trial: r.name for r in results.records}
    assert names[v.leader] == "max-num-seqs=16"
    [c] = v.comparisons
    assert c.decision == "better" and c.ci_low_pct > 50 and (c.n_a, c.n_b) == (5, 5)
