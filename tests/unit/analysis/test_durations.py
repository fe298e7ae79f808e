"""An earlier sweep's measured durations (farm/analysis/durations.py) drive the GPU-hour estimate
of `farm sweep --dry-run --tracking-uri` (farm/study/grid.py: grid_costs)."""

from __future__ import annotations

from farm.analysis.durations import measured_durations
from farm.analysis.records import records_from_trials
from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.study.grid import expand, grid_costs


def _run(profile: str, repeat: int, start: float, wall: float, status=Status.ok) -> ProfileRun:
    metrics = RunMetrics(successful_requests=10, errored_requests=0, incomplete_requests=0, total_requests=10,
                         success_rate=1.0, duration_s=wall - 10, total_input_tokens=10, total_output_tokens=10,
                         request_throughput=10, output_tps=10, total_tps=20)
    return ProfileRun(profile=profile, repeat=repeat, status=status, metrics=metrics, started_at=start,
                      finished_at=start + wall)


def test_medians_of_the_runs_that_ended_ok_price_the_grids_they_cover(study):
    trials = expand(study, "seed")[:3]
    walls = [(60.0, 30.0), (80.0, 40.0), (70.0, 999.0)]  # (sharegpt, throughput) run wall times
    results = []
    for i, (trial, ready) in enumerate(zip(trials, (200.0, 300.0, 250.0))):
        rs = [_run("sharegpt", 0, 1000.0, walls[i][0]), _run("throughput", 0, 2000.0, walls[i][1])]
        if i == 2:
            rs[1].status = Status.timeout  # a failed run measures nothing
        results.append(TrialResult(sweep_id="s", trial=trial, status=Status.ok, runs=rs, started_at=0.0,
                                   finished_at=3000.0, engine_reported={"ready_s": ready}))
    measured = measured_durations(records_from_trials(results, study, grid="seed"), "s", run_overhead_s=15.0)
    assert measured.profile_s == {"sharegpt": 70.0, "throughput": 35.0} and measured.runs == 5
    by_engine = {}
    for trial, ready in zip(trials, (200.0, 300.0, 250.0)):
        by_engine.setdefault(trial.engine, []).append(ready)
    assert set(measured.start_s) == set(by_engine)
    costs = grid_costs(study, measured=measured)
    assert costs["seed"].durations_from.startswith("durations measured in sweep s (5 runs")
    assert costs["seed"].profile_seconds["sharegpt"] == 70.0 and costs["seed"].run_overhead_s == 0.0
    # smoke's mock profiles were not measured here: the seed's (and the profiles' own) durations stay
    assert costs["smoke"].durations_from == "the seed's measured durations"


def test_a_sweep_without_a_finished_run_gives_no_durations(study):
    trial = expand(study, "seed")[0]
    failed = TrialResult(sweep_id="s", trial=trial, status=Status.engine_failed_to_start, reason="x")
    assert measured_durations(records_from_trials([failed], study, grid="seed"), "s", 15.0) is None


def test_an_engines_cold_and_warm_starts_are_measured_apart(study):
    # vLLM trials of the seed grid: two compiled from scratch, two found the node's cache warm, one did not say.
    trials = [t for t in expand(study, "seed") if t.engine == "vllm"][:5]
    starts = [(250.0, False), (230.0, False), (100.0, True), (110.0, True), (400.0, None)]  # (ready_s, cache hit)
    results = []
    for trial, (ready, hit) in zip(trials, starts):
        reported = {"ready_s": ready} if hit is None else {"ready_s": ready, "compile_cache_hit": hit}
        results.append(TrialResult(sweep_id="s", trial=trial, status=Status.ok, runs=[_run("sharegpt", 0, 0.0, 60.0)],
                                   started_at=0.0, finished_at=1000.0, engine_reported=reported))
    measured = measured_durations(records_from_trials(results, study, grid="seed"), "s", run_overhead_s=15.0)
    assert measured.cold_start_s == {"vllm": 240.0} and measured.warm_start_s == {"vllm": 105.0}
    assert measured.start_s == {"vllm": 230.0}  # the dry run's estimate: every start, whatever its cache
