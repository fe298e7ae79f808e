"""The guarded local search, replayed from what was measured (farm/analysis/local_search.py):
its neighbourhood, when it moves, what it spends, and its answer."""

from __future__ import annotations

import itertools


from farm.analysis import local_search as ls
from farm.analysis.results import HeldSpan, ProfileRun, RunMetrics, Status, TrialResult
from farm.study.trial import Trial

PRIMARY = "chat"
REQUESTS = {"chat": 48, "gen": 16}


def _grid(axes: dict[str, list], engine: str = "mock") -> list[Trial]:
    out = []
    for i, values in enumerate(itertools.product(*axes.values())):
        flags = dict(zip(axes, values))
        tid = f"{engine}-" + "-".join(str(v) for v in values)
        out.append(Trial(id=tid, engine=engine, model_key="m", model="m", flags=flags, profiles=[PRIMARY, "gen"],
                         index=i))
    return out


def _coords(trials):
    return ls.coordinates(trials, {})


def _metrics(tps: float) -> RunMetrics:
    return RunMetrics(successful_requests=10, total_requests=10, success_rate=1.0, duration_s=10, total_input_tokens=1,
                      total_output_tokens=1, request_throughput=1, output_tps=tps / 2, total_tps=tps)


def _result(trial: Trial, runs: list[tuple[int, str, float]], seconds: float = 100.0) -> TrialResult:
    """runs: (step, profile, total tok/s); one held span per step."""
    steps = sorted({s for s, _, _ in runs})
    return TrialResult(sweep_id="s", trial=trial, status=Status.ok, started_at=0.0, finished_at=seconds * len(steps),
                       runs=[ProfileRun(profile=p, repeat=i, status=Status.ok, metrics=_metrics(v), pass_index=s)
                             for i, (s, p, v) in enumerate(runs)],
                       spans=[HeldSpan(pass_index=s, started_at=0.0, finished_at=seconds) for s in steps])


def _plan(start, trials, results, budget=None, est=None):
    return ls.plan(start, trials, _coords(trials), results, primary=PRIMARY, requests=REQUESTS,
                   profiles=[PRIMARY, "gen"], budget_gpu_hours=budget,
                   trial_estimate_gpu_hours=est or {"step": 0.01, "final": 0.02})


STEP = f"{PRIMARY}.rung1"


def test_neighbours_are_one_coordinate_away_and_the_next_value_on_an_ordered_axis():
    trials = _grid({"batch": [None, 4096, 8192, 16384], "mode": ["a", "b", "c"]})
    nbrs = {(n.axis, n.value) for n in ls.neighbours("mock-4096-a", trials, _coords(trials))}
    # numbers: the next value each side (the engine default, None, sorts first); names: every other value
    assert nbrs == {("--batch", None), ("--batch", 8192), ("--mode", "b"), ("--mode", "c")}


def test_the_same_coordinates_on_another_engine_are_a_neighbour():
    trials = _grid({"batch": [1, 2]}) + [t.model_copy(update={"index": 10 + t.index}) for t in _grid({"batch": [1, 2]}, "other")]
    nbrs = {(n.trial, n.axis) for n in ls.neighbours("mock-1", trials, _coords(trials))}
    assert nbrs == {("mock-2", "--batch"), ("other-1", "engine")}


def test_every_step_judges_at_the_familys_alpha_and_the_final_comparison_tests_the_claim_afresh():
    assert {ls.step_alpha(k) for k in range(1, 10)} == {0.05}


def test_nothing_measured_yet_races_the_start_against_its_neighbours_on_a_short_primary():
    trials = _grid({"x": [1, 2, 3]})
    p = _plan("mock-2", trials, [])
    assert not p.done and p.trials == ["mock-2", "mock-1", "mock-3"]
    assert p.rung.profiles == {STEP: PRIMARY} and p.rung.requests[STEP] == 16 and p.rung.repeats == ls.STEP_REPEATS


def test_a_significantly_better_neighbour_replaces_the_start_and_the_search_goes_on():
    trials = _grid({"x": [1, 2, 3]})
    by = {t.id: t for t in trials}
    results = [_result(by["mock-2"], [(1, STEP, v) for v in (100, 101, 99)]),
               _result(by["mock-1"], [(1, STEP, v) for v in (80, 81, 79)]),
               _result(by["mock-3"], [(1, STEP, v) for v in (130, 131, 129)])]
    p = _plan("mock-2", trials, results)
    assert p.steps[0].outcome == "moved" and p.steps[0].moved_to == "mock-3"
    judged = {j.neighbour.trial: j for j in p.steps[0].judged}
    assert judged["mock-3"].better and not judged["mock-1"].better and "slower" in judged["mock-1"].why
    # mock-3 has no neighbour left that was not raced: the search ends, and the final comparison is next
    assert p.stop == "converged" and p.final and sorted(p.trials) == ["mock-2", "mock-3"]
    assert set(p.rung.profiles) == {PRIMARY, "gen"} and p.rung.repeats == 3
    # what the comparison will cost is said before it runs: two trials at the final estimate (0.02)
    assert p.estimate_gpu_hours == 0.04


def test_a_lead_within_the_noise_does_not_move_the_search():
    trials = _grid({"x": [1, 2]})
    by = {t.id: t for t in trials}
    results = [_result(by["mock-1"], [(1, STEP, v) for v in (100, 110, 90)]),
               _result(by["mock-2"], [(1, STEP, v) for v in (104, 114, 94)])]
    p = _plan("mock-1", trials, results)
    # nor is it a proof that the neighbour is no better: a lead of 4 % within 10 % noise is said as
    # undecided, never as converged
    assert p.done and p.incumbent == "mock-1" and p.stop == "undecided" and not p.final
    assert "cannot yet be told from it" in p.reason and "the start stays until more runs tell" in p.reason
    (j,) = p.steps[0].judged
    assert j.decision == "undecided" and not j.better and not j.settled
    assert any("ended: a neighbour could not be told from the incumbent" in line and "no answer yet" in line
               for line in ls.path_lines(p))


def test_the_search_converges_only_on_neighbours_proven_no_better_by_the_margin():
    """The same two configurations, quiet: the neighbour's interval lies inside ±3 %, so the search
    says what the data proves (converged: no neighbour better by more than the margin)."""
    trials = _grid({"x": [1, 2]})
    by = {t.id: t for t in trials}
    results = [_result(by["mock-1"], [(1, STEP, v) for v in (100.0, 100.3, 99.7, 100.1, 99.9)]),
               _result(by["mock-2"], [(1, STEP, v) for v in (100.4, 100.7, 100.1, 100.5, 100.3)])]
    p = _plan("mock-1", trials, results)
    assert p.done and p.incumbent == "mock-1" and p.stop == "converged"
    (j,) = p.steps[0].judged
    assert j.settled and not j.better and j.decision == "equivalent" and "equivalent within \u00b13 %" in j.why
    assert "better by more than 3 % (each proven)" in p.reason and "nothing beat the start" in p.reason


def test_a_neighbour_better_by_less_than_the_margin_does_not_move_the_search():
    """Significantly faster, by 1.5 %, with an interval that reaches past 3 %: not worth a move, and
    not proven below the margin either."""
    trials = _grid({"x": [1, 2]})
    by = {t.id: t for t in trials}
    results = [_result(by["mock-1"], [(1, STEP, v) for v in (100.0, 101.0, 99.0, 100.5, 99.5)]),
               _result(by["mock-2"], [(1, STEP, v) for v in (101.5, 102.8, 100.2, 102.0, 101.0)])]
    p = _plan("mock-1", trials, results)
    (j,) = p.steps[0].judged
    assert not j.better and p.incumbent == "mock-1"


def test_two_improving_axes_race_their_combination_which_must_win_itself():
    trials = _grid({"a": [0, 1], "b": [0, 1]})
    by = {t.id: t for t in trials}
    results = [_result(by["mock-0-0"], [(1, STEP, v) for v in (100, 101, 99)]),
               _result(by["mock-1-0"], [(1, STEP, v) for v in (120, 121, 119)]),
               _result(by["mock-0-1"], [(1, STEP, v) for v in (110, 111, 109)])]
    p = _plan("mock-0-0", trials, results)
    assert p.steps[0].moved_to == "mock-1-0"
    step2 = p.steps[1]
    assert step2.combination == "mock-1-1" and step2.race == ["mock-1-0", "mock-1-1"]


def test_a_step_the_budget_cannot_pay_for_ends_the_search():
    trials = _grid({"x": [1, 2, 3]})
    p = _plan("mock-2", trials, [], budget=0.015, est={"step": 0.01, "final": 0.02})
    # not even the start and one neighbour (0.02): the search's budget; the final comparison comes on top
    assert p.done and p.stop == "budget" and p.incumbent == "mock-2" and "budget" in p.reason


def test_the_final_comparison_gives_each_profile_an_interval():
    trials = _grid({"x": [1, 2]})
    by = {t.id: t for t in trials}
    results = [_result(by["mock-1"], [(1, STEP, v) for v in (100, 101, 99)] + [(2, p, v) for p in (PRIMARY, "gen")
                                                                                for v in (100, 102, 98)]),
               _result(by["mock-2"], [(1, STEP, v) for v in (150, 151, 149)] + [(2, p, v) for p in (PRIMARY, "gen")
                                                                                for v in (150, 153, 147)])]
    p = _plan("mock-1", trials, results)
    assert p.done and p.final and p.incumbent == "mock-2"
    rows = {d.profile: d for d in ls.final_comparison(p, results)}
    assert set(rows) == {PRIMARY, "gen"}
    assert all(d.significant and d.ci_low_pct > 30 and d.pick_runs == d.start_runs == 3 for d in rows.values())
    assert p.spent_by_phase["final"] > 0 and p.spent_by_phase["search"] > 0
    lines = ls.path_lines(p)
    assert lines[-1].startswith("  ended: no neighbour") and "farm's pick: mock-2" in lines[-1]


def test_a_budget_short_of_a_whole_step_races_what_it_pays_for_and_says_what_was_left():
    trials = _grid({"mode": ["a", "b", "c", "d"]})
    by = {t.id: t for t in trials}
    est = {"step": 0.01, "final": 0.02}
    p = _plan("mock-a", trials, [], budget=0.03, est=est)
    # 0.03 pays for 3 trials: the start and two neighbours
    assert p.trials == ["mock-a", "mock-b", "mock-c"] and p.steps[0].unraced == ["mock-d"]
    results = [_result(by[t], [(1, STEP, v) for v in (100, 101, 99)], seconds=36) for t in ("mock-a", "mock-b", "mock-c")]
    p = _plan("mock-a", trials, results, budget=0.03, est=est)
    assert p.done and p.stop == "budget" and "1 were not raced for want of budget" in p.reason
    assert any("not raced (budget): mock-d" in line for line in ls.path_lines(p))


def test_a_capacity_profile_in_the_final_comparison_is_no_throughput_delta():
    # The vLLM CPU search (bench/vllm-cpu/from-command/): its capacity profile's runs are a search
    # over loads; their mean throughput said "-29.6 %" for two trials of the same capacity.
    trials = _grid({"x": [1, 2]})
    by = {t.id: t for t in trials}
    results = [_result(by["mock-1"], [(1, STEP, v) for v in (100, 101, 99)] + [(2, PRIMARY, v) for v in (100, 102, 98)]),
               _result(by["mock-2"], [(1, STEP, v) for v in (150, 151, 149)] + [(2, PRIMARY, v) for v in (150, 153, 147)])]
    for res, tps in zip(results, (600.0, 400.0)):
        res.runs.extend(ProfileRun(profile="gen", repeat=i, status=Status.ok, metrics=_metrics(tps * load), pass_index=2,
                                   load=load) for i, load in enumerate((1, 4)))
    p = _plan("mock-1", trials, results)
    rows = {d.profile: d for d in ls.final_comparison(p, results)}
    assert rows["gen"].capacity_search and rows["gen"].relative_pct is None and rows["gen"].p_holm is None
    # the throughput profile alone is Holm's family: its p is its own test's
    assert rows[PRIMARY].significant and not rows[PRIMARY].capacity_search
    from farm.report.search import local_search_lines
    from farm.report.models import LocalSearchNote

    text = "\n".join(local_search_lines(LocalSearchNote(sweep_id="s", plan=p, final=list(rows.values()), labels={})))
    assert "Holm over 1 profiles" in text and "gen: a capacity search" in text and "-" not in text.split("gen:")[1][:40]


# --------------------------------------------------------------------------------------
# a start that cannot start: repaired, or the search stops with why


def _repair(trial: str, repaired: str, source: str = "predicted") -> ls.Repair:
    return ls.Repair(trial=trial, repaired=repaired, value=1463, source=source, gpu="H100",
                     cause="2,048 requests at once (max_num_seqs) exceed the ~1,509 state blocks")


def _with_repaired(trials: list[Trial], original: str, repaired: str) -> tuple[list[Trial], dict]:
    """The grid with `original` swapped for its repair at the same coordinates, as plan_of does."""
    coords = _coords(trials)
    swapped = [t.model_copy(update={"id": repaired}) if t.id == original else t for t in trials]
    return swapped, {repaired if k == original else k: v for k, v in coords.items()}


def test_a_start_that_cannot_start_is_searched_from_its_repair_and_the_path_says_so():
    trials, coords = _with_repaired(_grid({"x": [1, 2, 3]}), "mock-2", "mock-2-capped")
    p = ls.plan("mock-2", trials, coords, [], primary=PRIMARY, requests=REQUESTS, profiles=[PRIMARY, "gen"],
                budget_gpu_hours=None, trial_estimate_gpu_hours={"step": 0.01, "final": 0.02},
                repairs=[_repair("mock-2", "mock-2-capped")])
    # the repair is the start: raced first, at the original's coordinates (its neighbours are the original's)
    assert p.start == "mock-2-capped" and p.given_start == "mock-2"
    assert p.trials == ["mock-2-capped", "mock-1", "mock-3"]
    lines = ls.path_lines(p)
    assert any(line.strip().startswith("your command does not start on H100 (predicted before any start)")
               and "max_running_requests = 1,463" in line for line in lines)


def test_a_start_that_cannot_start_stops_the_search_when_the_study_asks_for_no_repair():
    trials, coords = _with_repaired(_grid({"x": [1, 2, 3]}), "mock-2", "mock-2-capped")
    p = ls.plan("mock-2", trials, coords, [], primary=PRIMARY, requests=REQUESTS, profiles=[PRIMARY, "gen"],
                budget_gpu_hours=None, trial_estimate_gpu_hours={"step": 0.01, "final": 0.02},
                repairs=[_repair("mock-2", "mock-2-capped")], repair_start=False)
    assert p.done and p.stop == "start_fails" and not p.trials and not p.final
    assert p.reason.startswith("your command does not start on H100") and "repair_start: false" in p.reason
    assert "no answer" in ls.path_lines(p)[-1]


def test_neighbours_are_not_raced_against_a_start_that_measured_nothing():
    trials = _grid({"x": [1, 2, 3]})
    start = next(t for t in trials if t.id == "mock-2")
    failed = TrialResult(sweep_id="s", trial=start, status=Status.engine_failed_to_start, started_at=0.0,
                         finished_at=240.0, reason="the engine core failed to initialize: RuntimeError: boom",
                         spans=[HeldSpan(pass_index=1, started_at=0.0, finished_at=240.0)])
    p = _plan("mock-2", trials, [failed])
    # the start ran alone and gave nothing: the search ends there with the start's own failure, no neighbour raced
    assert p.done and p.stop == "failed" and not p.final and p.steps[0].outcome == "failed"
    assert "engine_failed_to_start: the engine core failed to initialize: RuntimeError: boom" in p.reason
    assert "nothing beat the start" not in p.reason and "no answer" in ls.path_lines(p)[-1]


def test_a_step_resumed_on_another_machine_is_judged_within_machines_on_the_h100s_runs(tmp_path):
    """The lent H100's search (bench/h100/from-seed/store.tgz): step 1's incumbent (farm's repair of
    the seed's command) and the performance-mode-default neighbour ran in the first sitting (runs
    without a machine fingerprint: one unknown machine), prefix caching off and the FP8 KV cache in
    the second, on another machine, the incumbent's control in the third and again in the fourth
    beside GPU memory 0.95, each on a machine of its own; KV offload was refused by the engine.
    Pooled, prefix caching off would lead the incumbent; by machines it cannot be told from it (no
    lead is claimed), for want of the incumbent's runs on its machine (the controls ran on others),
    while the neighbours of the incumbent's own sittings are judged within them: GPU memory 0.95
    proven equivalent beside the fourth sitting's control, and KV offload, a final refusal, settled
    as no candidate rather than left open."""
    from conftest import H100_SEARCH, h100_search_store
    from farm.store import tracking

    results = tracking.load_results(h100_search_store(tmp_path), H100_SEARCH)
    rung = ls.step_rung(1, "sharegpt_synthetic", 1000)
    blocks = ls.blocks_of(results, rung)
    incumbent, same_sitting, prefix_off, kv_fp8 = "vllm-1ffa2a61", "vllm-bd7bb3c0", "vllm-d9b0e5bb", "vllm-c1c3eb4e"
    offload, memory = "vllm-ba4b5c26", "vllm-d19a1e96"
    assert set(blocks[same_sitting]) == {"unknown"}
    controls = set(blocks[incumbent]) - {"unknown"}  # the controls' machines, third and fourth sittings
    assert len(controls) == 2 and set(blocks[memory]) < controls and offload not in blocks
    assert set(blocks[prefix_off]) == set(blocks[kv_fp8]) and not ({"unknown"} | controls) & set(blocks[prefix_off])
    race = [incumbent, same_sitting, prefix_off, kv_fp8, offload, memory]
    step = ls.Step(index=1, incumbent=incumbent, race=race, alpha=0.05)
    nbrs = {t: ls.Neighbour(trial=t, axis="x", value=t) for t in step.race[1:]}
    judged = {j.neighbour.trial: j for j in ls._judge(step, nbrs, ls.samples_of(results, rung), 0.03, blocks,
                                                       ls._ended_without_runs(results, race))}
    assert judged[memory].decision == "equivalent" and judged[memory].settled and -1 < judged[memory].relative_pct < 1
    assert judged[offload].decision == "failed" and judged[offload].settled and not judged[offload].better
    assert "engine_failed_to_start" in judged[offload].why and "HMA" in judged[offload].why
    for t in (prefix_off, kv_fp8):
        assert judged[t].decision == "undecided" and not judged[t].better and not judged[t].settled
        assert "across machines, no shared control" in judged[t].why and "the incumbent run again" in judged[t].why
        assert judged[t].relative_pct is None  # no lead is claimed across machines
    assert judged[same_sitting].decision is not None and "across machines" not in judged[same_sitting].why
