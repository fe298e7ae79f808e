"""The one search runner (farm/run/search.py): a strategy registered in a test module runs through
`run_search` with no edit to the driver or the CLI, its jobs stored in a real MLflow store (SQLite in
tmp_path) as they end: a trial's first job as its run, a later one appended to the same run; a round
that measures nothing ends the search with the strategy's own last plan; an interrupted search picks
up from what the store holds. What stands in for Ray is only the benchmark numbers of each job."""

from __future__ import annotations

import pytest

from farm.analysis import plan as passplan
from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.run import search
from farm.store import tracking
from farm.strict import Strict
from farm.study.grid import expand
from farm.study.load import load_study
from sweeptools import write_study


class TwicePlan(Strict):
    done: bool
    reason: str
    round: int = 0
    trials: list[str] = []


@search.register("twice-for-test")
class Twice(search.BaseStrategy):
    """Each trial once, then each once more, then done: every job stored by the runner."""

    def __init__(self, ctx: search.SearchContext) -> None:
        super().__init__(ctx)
        self.recorded: list[TwicePlan] = []

    def plan(self, stored, first):
        passes = {r.trial.id: max((run.pass_index for run in r.runs), default=0) for r in stored}
        todo = [t.id for t in self.ctx.trials if passes.get(t.id, 0) < 2]
        if not todo:
            return TwicePlan(done=True, reason="every trial ran twice")
        k = 1 + min(passes.get(t, 0) for t in todo)
        return TwicePlan(done=False, reason=f"round {k}", round=k, trials=[t for t in todo if passes.get(t, 0) < k])

    def jobs(self, p, stored, first):
        by_id = {t.id: t for t in self.ctx.trials}
        return [(by_id[t], p.round) for t in p.trials]

    def store(self, new, previous, p):
        if new.status == Status.cancelled:
            return None
        if previous is None:
            return search.Stored(first=new)
        return search.Stored(merged=passplan.merge_pass(previous, new, p.round), index=p.round)

    def record(self, p):
        self.recorded.append(p)

    def stopped(self, p):
        return p.model_copy(update={"done": True, "reason": f"round {p.round} measured nothing"})


def _metrics(tps: float) -> RunMetrics:
    return RunMetrics(successful_requests=8, total_requests=8, success_rate=1.0, duration_s=2.0,
                      total_input_tokens=tps, total_output_tokens=tps, request_throughput=4, output_tps=tps / 2,
                      total_tps=tps, ttft_mean_ms=5.0, ttft_p95_ms=8.0, tpot_mean_ms=20.0)


@pytest.fixture
def sweep(tmp_path):
    study = load_study(write_study(tmp_path / "s.yaml", name="runner", grid="g",
                                   blocks=[{"engine": "mock", "models": ["tiny"], "axes": {"ttft-ms": [10, 20]}}]))
    grid = "g"
    trials = expand(study, grid)
    assert len(trials) == 2
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    exp_id, sweep_id = tracking.start_sweep(uri, study.experiment_name, study, grid, trials,
                                            command="farm sweep", repeats=1)
    ctx = search.SearchContext(study=study, grid=grid, trials=trials, tracking_uri=uri, experiment_id=exp_id,
                               sweep_id=sweep_id, make_job=lambda t, n, i: None)
    return ctx


def _runner(ctx, cancel: set[tuple[str, int]] = frozenset()):
    ran: list[tuple[str, int]] = []

    def run_jobs(jobs, on_result):
        out = []
        for trial, k in jobs:
            ran.append((trial.id, k))
            status = Status.cancelled if (trial.id, k) in cancel else Status.ok
            runs = [] if status == Status.cancelled else [
                ProfileRun(profile=trial.profiles[0], repeat=0, status=Status.ok, metrics=_metrics(100.0 * k),
                           pass_index=k, started_at=1.7e9 + k, finished_at=1.7e9 + k + 1)]
            result = TrialResult(sweep_id=ctx.sweep_id, trial=trial, status=status, runs=runs, attempt=1,
                                 serve_command=f"serve {trial.name}", started_at=1.7e9, finished_at=1.7e9 + 9)
            on_result(result)
            out.append(result)
        return out

    return run_jobs, ran


def test_a_registered_strategy_runs_through_the_one_runner_and_each_trial_stays_one_run(sweep):
    strategy = search.strategy_for("twice-for-test", sweep)
    assert "twice-for-test" in search.names() and {"grid", "auto", "halving", "local"} <= set(search.names())
    run_jobs, ran = _runner(sweep)
    last = search.run_search(strategy, sweep, run_jobs=run_jobs)
    assert last.done and last.reason == "every trial ran twice"
    ids = [t.id for t in sweep.trials]
    assert ran == [(ids[0], 1), (ids[1], 1), (ids[0], 2), (ids[1], 2)]
    stored = tracking.load_results(sweep.tracking_uri, sweep.sweep_id)
    assert sorted(r.trial.id for r in stored) == sorted(ids)  # one child run per trial
    assert all(sorted(run.pass_index for run in r.runs) == [1, 2] for r in stored)
    assert [p.reason for p in strategy.recorded] == ["round 1", "round 2", "every trial ran twice"]


def test_a_round_that_measures_nothing_ends_the_search_with_the_strategys_last_plan(sweep):
    ids = [t.id for t in sweep.trials]
    run_jobs, ran = _runner(sweep, cancel={(ids[0], 1), (ids[1], 1)})
    told = []
    last = search.run_search(search.strategy_for("twice-for-test", sweep), sweep, run_jobs=run_jobs,
                             on_plan=told.append)
    assert last.done and last.reason == "round 1 measured nothing"
    assert [p.reason for p in told] == ["round 1", "round 1 measured nothing"]
    assert tracking.load_results(sweep.tracking_uri, sweep.sweep_id) == []


def test_a_search_cut_off_midway_resumes_from_what_the_store_holds(sweep):
    ids = [t.id for t in sweep.trials]
    # the second trial's second job was cut off (cancelled: not stored), the search stopped there
    run_jobs, _ = _runner(sweep, cancel={(ids[1], 2)})
    search.run_search(search.strategy_for("twice-for-test", sweep), sweep, run_jobs=run_jobs)
    run_jobs, ran = _runner(sweep)
    last = search.run_search(search.strategy_for("twice-for-test", sweep), sweep, run_jobs=run_jobs)
    assert ran == [(ids[1], 2)]  # only what the store lacks runs again
    assert last.done
    stored = {r.trial.id: r for r in tracking.load_results(sweep.tracking_uri, sweep.sweep_id)}
    assert sorted(run.pass_index for run in stored[ids[1]].runs) == [1, 2]


def test_each_strategy_is_a_chain_of_registered_ones_and_an_unknown_one_is_named():
    with pytest.raises(KeyError, match="registered: .*grid.*halving.*local"):
        search.chain("no-such", auto_repeats=False)
    assert [c.name for c in search.chain("grid", auto_repeats=False)] == ["grid"]
    assert [c.name for c in search.chain("grid", auto_repeats=True)] == ["grid", "auto"]
    assert [c.name for c in search.chain("local", auto_repeats=False)] == ["local"]
    assert [c.name for c in search.chain("halving", auto_repeats=False)] == ["halving"]
