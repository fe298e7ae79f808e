"""`--repeats auto` in a study of ordered steps (the seed's method): the decisions are the steps,
each against the step it builds on, as the report judges them; not every trial against the leader.
The rule on decisions as selection hands them over; the same rule on real runs in
tests/unit/cli/test_dry_run_text.py (the H200 seed sweep) and tests/e2e/test_auto_steps.py (mock)."""

from __future__ import annotations

from farm.analysis import plan
from farm.analysis.selection.models import DiffStat


def _step(a: str, b: str, decision: str, more: int | None = 4, machines: str = "one_machine") -> DiffStat:
    return DiffStat(a=a, b=b, relative_pct=1.0, ci_low_pct=-2.0, ci_high_pct=4.0, p_value=0.2, n_a=3, n_b=3,
                    decision=decision, eq_low_pct=-1.5, eq_high_pct=3.5, more_runs=more if decision == "undecided" else None,
                    machines=machines)


def _plan(decisions, spent=15, budget=40, repeats=None, passes_done=1, **kw):
    repeats = repeats or {t: 3 for d in decisions for t in (d.a, d.b)}
    return plan.next_step_pass(decisions, repeats_of=repeats, passes_done=passes_done, spent=spent, budget=budget,
                               alpha=0.01, max_passes=4, **kw)


def test_every_step_decided_ends_the_loop_and_says_each_decision():
    p = _plan([_step("s1", "s0", "better"), _step("s2", "s1", "equivalent"), _step("s3", "s2", "worse")])
    assert p.done and not p.trials
    assert "every step decided" in p.reason
    assert "s1 better than s0; s2 equivalent to s1; s3 worse than s2" in p.reason


def test_both_trials_of_each_open_step_run_again_and_no_decided_ones():
    # s0 is the leader by far; s2 vs s1 is the open question: the leader rule would run s0 again,
    # the step rule runs the two trials whose step is undecided
    p = _plan([_step("s1", "s0", "worse"), _step("s2", "s1", "undecided"), _step("s3", "s2", "undecided")])
    assert not p.done
    assert p.trials == ["s2", "s1", "s3"] and p.repeats == plan.AUTO_STEP and p.runs == 3 * plan.AUTO_STEP
    assert "2 step(s) open" in p.reason and "s2 vs s1 (" in p.reason and "s3 vs s2 (" in p.reason
    assert "~4 more runs each would decide it" in p.reason


def test_the_budget_takes_the_open_steps_in_the_grids_order():
    steps = [_step("s1", "s0", "undecided"), _step("s3", "s2", "undecided")]
    p = _plan(steps, spent=35, budget=40)  # room for 4 runs: one step's two trials
    assert p.trials == ["s1", "s0"] and p.runs == 4
    spent = _plan(steps, spent=37, budget=40)
    assert spent.done and spent.reason.startswith("run budget spent: 37 of 40") and "still open: s1 vs s0" in spent.reason


def test_a_trial_at_the_repeat_limit_leaves_its_step_open_and_says_so():
    p = _plan([_step("s1", "s0", "undecided")], repeats={"s1": plan.AUTO_MAX_REPEATS, "s0": 3})
    assert p.done and "the most repeats a trial gets" in p.reason


def test_steps_not_measured_yet_are_named_and_need_no_runs():
    p = _plan([_step("s2", "s1", "equivalent")], unmeasured=["s0", "s3"])
    assert p.done and p.reason.endswith("; not measured yet: s0, s3")
    nothing = _plan([], unmeasured=["s0"])
    assert nothing.done and "nothing to decide" in nothing.reason


def test_a_step_across_machines_without_a_control_says_what_would_bridge_it():
    p = _plan([_step("s1", "s0", "undecided", more=None, machines="no_shared_control")])
    assert not p.done and p.trials == ["s1", "s0"]
    assert "no machine ran both: runs of both on one machine would let them be compared" in p.reason


def test_the_look_limit_ends_the_loop():
    p = _plan([_step("s1", "s0", "undecided")], passes_done=4)
    assert p.done and p.reason.startswith("4 looks taken, the most this sweep's budget plans (4)")
