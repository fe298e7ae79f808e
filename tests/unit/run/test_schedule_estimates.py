"""The scheduler's estimates as a sweep reads them when it starts (farm/run/estimate.py:
schedule_durations), from a real MLflow store (SQLite in tmp_path) written by farm's own writer
(`farm.store.tracking`, what the trial actors call): the engine starts and run times the study's
earlier sweep measured, a resumed sweep's own, and the defaults where the store holds none."""

from __future__ import annotations

from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.analysis.schedule import items_of
from farm.run.estimate import schedule_durations
from farm.store import tracking
from farm.study.grid import expand

GRID = "seed"


def _run(profile: str, start: float, wall: float) -> ProfileRun:
    metrics = RunMetrics(successful_requests=10, errored_requests=0, incomplete_requests=0, total_requests=10,
                         success_rate=1.0, duration_s=wall - 10, total_input_tokens=10, total_output_tokens=10,
                         request_throughput=10, output_tps=10, total_tps=20)
    return ProfileRun(profile=profile, repeat=0, status=Status.ok, metrics=metrics, started_at=start,
                      finished_at=start + wall)


def _sweep(uri: str, study, trials, starts: list[tuple[float, bool]], wall: float, status: Status = Status.ok) -> str:
    """A sweep of `trials` as its actors log it: trial i started its engine in starts[i] seconds
    (cold or with the node's compile cache warm, as its log said), then each run took `wall` s."""
    exp_id, sweep_id = tracking.start_sweep(uri, study.experiment_name, study, GRID, trials,
                                            command=f"farm sweep --grid {GRID}", repeats=1)
    for trial, (ready, hit) in zip(trials, starts):
        t0 = 1_700_000_000.0
        runs = [_run(p, t0 + ready + i * wall, wall) for i, p in enumerate(trial.profiles)] if status == Status.ok else []
        tracking.log_trial(uri, exp_id, sweep_id, TrialResult(
            sweep_id=sweep_id, trial=trial, status=status, runs=runs, started_at=t0, finished_at=t0 + 1000,
            reason=None if status == Status.ok else "engine exited with code 1",
            engine_reported={"ready_s": ready, "compile_cache_hit": hit}), None)
    tracking.finish_sweep(uri, sweep_id, "finished")
    return sweep_id


def _vllm_trials(study, n: int):
    return [t for t in expand(study, GRID) if t.engine == "vllm"][:n]


def test_a_store_without_an_earlier_sweep_gives_the_default_estimates(tmp_path, study):
    missing = tmp_path / "mlflow.db"
    measured, line = schedule_durations(f"sqlite:///{missing}", study)
    assert measured is None and line.startswith("schedule: default estimates")
    assert not missing.exists(), "reading the estimates creates no store; the sweep does"

    other = study.model_copy(update={"name": "another-study"})
    uri = f"sqlite:///{missing}"
    _sweep(uri, other, _vllm_trials(other, 2), [(300.0, False), (90.0, True)], wall=200.0)
    measured, line = schedule_durations(uri, study)
    assert measured is None
    assert line.startswith("schedule: default estimates") and f"no earlier sweep of study {study.name}" in line


def test_an_earlier_sweeps_measured_starts_and_runs_become_the_schedules_estimates(tmp_path, study):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    trials = _vllm_trials(study, 4)
    earlier = _sweep(uri, study, trials, [(320.0, False), (300.0, False), (60.0, True), (70.0, True)], wall=200.0)

    measured, line = schedule_durations(uri, study)
    assert line.startswith(f"schedule: durations measured in sweep {earlier} (16 runs)")
    assert "vllm cold 310 s / warm 65 s" in line
    default, now = items_of(study, trials), items_of(study, trials, measured)
    t = trials[0]
    assert (default[t.id].cold_start_s, default[t.id].warm_start_s) == (240.0, 103.0)
    assert (now[t.id].cold_start_s, now[t.id].warm_start_s) == (310.0, 65.0)
    # 4 profiles of 200 s each on this cluster, against the seed's 40-125 s (plus 15 s of client each)
    assert now[t.id].seconds == 65.0 + 4 * 200.0 > default[t.id].seconds


def test_a_resumed_sweep_is_scheduled_by_its_own_runs(tmp_path, study):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    trials = _vllm_trials(study, 2)
    first = _sweep(uri, study, trials, [(400.0, False), (100.0, True)], wall=50.0)
    second = _sweep(uri, study, trials, [(200.0, False), (80.0, True)], wall=50.0)
    failed = _sweep(uri, study, trials, [(0.0, False), (0.0, False)], wall=0.0, status=Status.engine_failed_to_start)

    assert schedule_durations(uri, study, resume=first)[0].cold_start_s == {"vllm": 400.0}  # its own, not the newer
    # a resumed sweep that finished nothing yet: the study's latest other sweep
    measured, line = schedule_durations(uri, study, resume=failed)
    assert measured.source == second and line.startswith(f"schedule: durations measured in sweep {second}")
    # a new sweep after one that finished nothing: the latest sweep that measured something
    measured, line = schedule_durations(uri, study)
    assert measured.source == second and line.startswith(f"schedule: durations measured in sweep {second} (")
    # nothing finished anywhere: the defaults, and why
    other = tmp_path / "other.db"
    only_failed = _sweep(f"sqlite:///{other}", study, trials, [(0.0, False)] * 2, wall=0.0,
                         status=Status.engine_failed_to_start)
    measured, line = schedule_durations(f"sqlite:///{other}", study)
    assert measured is None and f"no finished run in sweep {only_failed}" in line


def test_what_the_newest_sweep_did_not_measure_comes_from_the_sweeps_before_it(tmp_path, study):
    """A warm-start check that ran one short profile after a full sweep: its starts are the newest,
    the other profiles' runs still come from the full sweep (not from the defaults)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    trials = _vllm_trials(study, 2)
    full = _sweep(uri, study, trials, [(300.0, False), (100.0, True)], wall=120.0)
    short = [t.model_copy(update={"profiles": t.profiles[:1]}) for t in trials]
    newest = _sweep(uri, study, short, [(280.0, False), (90.0, True)], wall=8.0)

    measured, line = schedule_durations(uri, study)
    first, *rest = trials[0].profiles
    assert measured.source == newest and measured.also == [full]
    assert measured.profile_s[first] == 8.0 and all(measured.profile_s[p] == 120.0 for p in rest)
    assert (measured.cold_start_s, measured.warm_start_s) == ({"vllm": 280.0}, {"vllm": 90.0})
    assert line.startswith(f"schedule: durations measured in sweep {newest} (then {full}) (")
