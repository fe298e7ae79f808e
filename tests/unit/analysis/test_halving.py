"""The pure halving planner: rungs, who stops and why, the budget, and resuming mid-rung."""

from __future__ import annotations

import random

import pytest

from farm.analysis import halving as h
from farm.analysis.results import ProfileRun, Status, TrialResult
from farm.study.trial import Trial

PROFILES = {"chat": 1000, "gen": 200}
PRIORS = h.Priors(start_s=240, run_s={"chat": 140, "gen": 70}, full_requests=PROFILES)


def rungs(n: int):
    return h.build_rungs(list(PROFILES), "chat", PROFILES, n)


def test_rungs_start_short_on_the_primary_profile_and_end_on_every_profile_in_full():
    rs = rungs(32)
    assert len(rs) == 3
    assert list(rs[0].profiles.values()) == ["chat"] and rs[0].requests == {"chat.rung1": 111}
    assert rs[-1].last and rs[-1].profiles == {"chat": "chat", "gen": "gen"} and rs[-1].requests == PROFILES
    assert rs[-1].repeats >= 3
    assert all(r.alpha == pytest.approx(0.05 / 3) for r in rs)
    assert [r.requests[r.primary] for r in rs] == sorted(r.requests[r.primary] for r in rs)


def test_a_trial_stops_only_when_significantly_worse_than_the_leader():
    rung = rungs(9)[0]
    survivors, stops = h.judge_rung({"best": [1000, 1010, 990], "close": [985, 1000, 995], "bad": [700, 705, 698],
                                     "noisy_low": [600, 1200, 900]}, {"dead": "engine_failed_to_start"}, rung)
    assert survivors[0] == "best" and set(survivors) == {"best", "close", "noisy_low"}
    kinds = {s.trial: s.kind for s in stops}
    assert kinds == {"bad": "significantly_worse", "dead": "failed"}
    assert "significantly worse than the leader best" in next(s.reason for s in stops if s.trial == "bad")


def _simulate(n: int, budget: float, seed: int = 0, stop_after: int | None = None, observed=None):
    """Run the planner against a known landscape; every job costs what it was estimated to cost."""
    rs = rungs(n)
    trials = [f"t{i:02d}" for i in range(n)]
    true = {t: 1000 * (1 + 0.02 * i) for i, t in enumerate(trials)}
    observed = observed if observed is not None else {}
    plans = []
    while True:
        p = h.next_rung(rs, trials, observed, priors=PRIORS, budget_gpu_hours=budget, gpus={t: 1 for t in trials})
        plans.append(p)
        if p.done:
            return plans, observed, true
        for k, t in enumerate(p.trials):
            if stop_after is not None and len(plans) == 2 and k >= stop_after:
                return plans, observed, true  # the driver stopped mid-rung
            o = observed.setdefault(t, h.Observed(gpus=1))
            o.ran.append(p.rung.index)
            rng = random.Random(f"{seed}:{t}:{p.rung.index}")  # the same measurement whether resumed or not
            o.samples[p.rung.index] = [true[t] * (1 + rng.gauss(0, 0.01)) for _ in range(p.rung.repeats)]
            runs = {name: [PRIORS.run_s[prof] * p.rung.requests[name] / PROFILES[prof]] * p.rung.repeats
                    for name, prof in p.rung.profiles.items()}
            o.run_s[p.rung.index] = runs
            o.wall_s[p.rung.index] = PRIORS.start_s + sum(map(sum, runs.values()))


def test_the_best_survives_and_the_budget_is_never_exceeded():
    plans, observed, true = _simulate(27, budget=20.0)
    last = plans[-1]
    assert last.done and last.spent_gpu_hours <= 20.0
    best = max(true, key=true.get)
    assert best not in {s.trial for s in last.stops}
    final = [t for t, o in observed.items() if 3 in o.ran]
    assert best in final
    worst = min(true, key=true.get)
    assert next(s for s in last.stops if s.trial == worst).rung == 1


def test_a_tight_budget_stops_trials_by_budget_and_says_so():
    plans, observed, _ = _simulate(27, budget=2.5)
    last = plans[-1]
    assert last.spent_gpu_hours <= 2.5
    budget_stops = [s for s in last.stops if s.kind == "budget"]
    assert budget_stops and all("not shown to be worse" in s.reason for s in budget_stops)


def test_a_sweep_stopped_mid_rung_resumes_with_the_same_trials():
    whole, _, _ = _simulate(27, budget=20.0)
    cut, observed, _ = _simulate(27, budget=20.0, stop_after=1)
    resumed, _, _ = _simulate(27, budget=20.0, observed=observed)
    assert cut[1].rung.index == 2 and resumed[0].rung.index == 2
    assert set(resumed[0].trials) == set(cut[1].trials[1:])  # only the rung's trials not yet run
    assert [s.trial for s in resumed[-1].stops] == [s.trial for s in whole[-1].stops]


def _result(trial: Trial, runs: list[ProfileRun], started: float, finished: float) -> TrialResult:
    return TrialResult(sweep_id="s", trial=trial, status=Status.ok, runs=runs, started_at=started, finished_at=finished)


def test_a_later_rung_is_appended_to_its_trial_and_observed_per_rung():
    rs = rungs(4)
    trial = Trial(id="mock-1", engine="mock", model_key="m", model="m", profiles=["chat.rung1"])

    def run(profile, repeat, tps, t0):
        return ProfileRun.model_validate({"profile": profile, "repeat": repeat, "status": "ok", "started_at": t0,
                                          "finished_at": t0 + 10, "metrics": _metrics(tps)})
    first = _result(trial, [run("chat.rung1", r, 100 + r, 100 + 10 * r) for r in range(3)], 0, 60)
    new = _result(trial.model_copy(update={"profiles": ["chat", "gen"]}),
                  [run("chat", r, 200 + r, 1000 + 10 * r) for r in range(3)] + [run("gen", 3, 50, 1100)], 990, 1200)
    merged = h.merge_rung(first, new, rs[-1])
    assert [r.pass_index for r in merged.runs] == [1, 1, 1, 2, 2, 2, 2]
    assert merged.trial.profiles == ["chat.rung1", "chat", "gen"]
    obs = h.observe([merged], rs)["mock-1"]
    assert obs.ran == [1, 2] and obs.samples[1] == [100, 101, 102] and obs.samples[2] == [200, 201, 202]
    assert obs.wall_s == {1: 60, 2: 210}


def _metrics(tps: float) -> dict:
    return {"successful_requests": 10, "total_requests": 10, "success_rate": 1.0, "duration_s": 1.0,
            "total_input_tokens": tps / 2, "total_output_tokens": tps / 2, "request_throughput": 10,
            "output_tps": tps / 2, "total_tps": tps}


def test_the_plan_is_read_back_from_stored_results_with_its_stops_and_spending(tmp_path):
    import yaml

    from farm.study.grid import expand
    from farm.study.load import load_study

    study_file = tmp_path / "s.yaml"
    study_file.write_text(yaml.safe_dump({
        "name": "h", "primary_profile": "p", "strategy": "halving", "budget_gpu_hours": 1.0,
        "models": {"tiny": {"name": "farm-tiny", "tokenizer": "farm:tiny"}}, "engines": {"mock": {}},
        "profiles": {"p": {"data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 4}, "requests": 24,
                           "max_seconds": 60}},
        "grids": {"g": {"blocks": [{"engine": "mock", "models": ["tiny"], "axes": {"itl-ms": [5, 200]}}]}}}))
    study = load_study(study_file)
    trials = expand(study, "g")
    fast, slow = trials

    def rung1(trial, tps):
        runs = [ProfileRun.model_validate({"profile": "p.rung1", "repeat": r, "status": "ok", "started_at": 10 + r,
                                           "finished_at": 12 + r, "metrics": _metrics(v)}) for r, v in enumerate(tps)]
        return _result(trial.model_copy(update={"profiles": ["p.rung1"]}), runs, 0, 30)

    stored = [rung1(fast, [800, 820, 790]), rung1(slow, [60, 61, 59])]
    plan = h.plan_from_results(study, "g", trials, stored)
    assert not plan.done and plan.rung.last and plan.trials == [fast.id]
    assert [(s.trial, s.kind, s.rung) for s in plan.stops] == [(slow.id, "significantly_worse", 1)]
    assert plan.spent_by_rung == {1: pytest.approx(60 / 3600, abs=1e-6)}  # two trials, 30 s each, no GPU: one slot each
    lines = h.summary_lines(plan, {fast.id: "fast", slow.id: "slow"})
    assert lines[1].startswith("  rung 1: 0.017 GPU-hours") and "stopped slow: rung 1: significantly worse" in lines[2]


def _plans_of_a_resumed_sweep():
    """Two legs of one sweep: the first ran rung 1 and recorded its plan at a budget too small for
    rung 2; resumed with a larger budget, it ran rung 2 of the leader and was interrupted before
    it could record the plan again."""
    rs = rungs(2)
    obs = {t: h.Observed(gpus=1, ran=[1], samples={1: [v, v + 5, v - 5]}, wall_s={1: 600},
                         run_s={1: {"chat.rung1": [60.0] * 3}}) for t, v in (("fast", 1000), ("slow", 500))}
    first = h.next_rung(rs, ["fast", "slow"], obs, priors=PRIORS, budget_gpu_hours=0.4, pruned={"huge": "too big"})
    obs["fast"].ran.append(2)
    obs["fast"].wall_s[2] = 900
    later = h.next_rung(rs, ["fast", "slow"], obs, priors=PRIORS, budget_gpu_hours=5.0, pruned={"huge": "too big"})
    return first, later


def test_a_stored_sweep_shows_the_drivers_plan_only_while_it_covers_every_stored_gpu_hour():
    first, later = _plans_of_a_resumed_sweep()
    assert first.done and first.reason.startswith("budget")
    assert h.report_plan(first, first) is first
    # the results outgrew the recorded plan (rung 2 ran after it): the plan recomputed from them
    assert h.report_plan(later, first) is later and later.spent_by_rung == {1: pytest.approx(1 / 3), 2: 0.25}
    # the same GPU-hours at another budget (resumed with --budget, stopped before it ran anything)
    assert h.report_plan(first.model_copy(update={"budget_gpu_hours": 5.0}), first).budget_gpu_hours == 5.0
    assert h.report_plan(later, None) is later  # interrupted before the driver recorded any plan


def test_the_trials_the_sweep_pruned_are_read_back_from_its_plan():
    first, _ = _plans_of_a_resumed_sweep()
    assert h.recorded_pruned(first) == {"huge": "too big"}
    assert h.recorded_pruned(h.RungPlan.model_validate_json(first.model_dump_json())) == {"huge": "too big"}


def test_a_plan_not_done_says_what_a_resume_would_run_not_that_it_ran():
    first, later = _plans_of_a_resumed_sweep()
    assert "; budget: " in h.summary_lines(first)[0]
    head = h.summary_lines(later.model_copy(update={"done": False, "reason": "rung 2 of 2: 1 trial(s) on chat"}))[0]
    assert head.endswith("; not finished; next, on --resume: rung 2 of 2: 1 trial(s) on chat"), head
