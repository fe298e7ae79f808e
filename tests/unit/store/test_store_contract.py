"""One contract for every `SweepStore` backend: the same sweep reads back the same everywhere.

A sweep of the smoke study is written to a real MLflow store (SQLite in tmp_path) by farm's own
writer (`farm.store.tracking`, what the trial actors and the driver call), then exported as a
results file the way the end of a sweep exports it (`farm.run.sweep_report.build`). Each backend
must then answer the reading commands (`farm report`, `farm analyze`, `farm status`,
`--resume`) alike: the sweep's metadata, its trials and how each ended, and its runs as
selection reads them. The trials cover a retry (the latest attempt wins), failed runs and a
trial whose engine never started.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.analysis.records import records_from_trials
from farm.analysis.outcome import FINISHED
from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.report import report_for
from farm.store import schema
from farm.store.base import SweepStore, finished_trial_ids
from farm.store.mlflow_store import MlflowStore
from farm.store.results_store import ResultsFileStore, trial_status
from farm.study.grid import expand
from farm.study.load import load_study

REPO = Path(__file__).resolve().parents[3]
GRID = "smoke"


def _metrics(tps: float, ok: float = 48, asked: float = 48) -> RunMetrics:
    return RunMetrics(successful_requests=ok, total_requests=asked, success_rate=ok / asked, duration_s=2.0,
                      total_input_tokens=tps, total_output_tokens=tps, request_throughput=ok / 2, output_tps=tps / 2,
                      total_tps=tps, ttft_mean_ms=50.0, ttft_p95_ms=80.0, guidellm_total_tps_mean=tps * 1.01)


def _run(profile: str, repeat: int, tps: float, status: Status = Status.ok, reason: str | None = None) -> ProfileRun:
    metrics = None if status in (Status.oom, Status.engine_crashed) else _metrics(tps, ok=48 if status == Status.ok else 30)
    return ProfileRun(profile=profile, repeat=repeat, status=status, reason=reason, metrics=metrics,
                      started_at=1_700_000_000.0 + repeat)


def _results(study, trials) -> tuple[list[TrialResult], list[TrialResult]]:
    """(every attempt in the order they were logged, the answer of each trial)."""
    common = dict(engine_version="guidellm 0.8.1", guidellm_version="0.8.1", node="node-a", node_id="a" * 32,
                  gpus=[], gpu_name=None)
    a, b, c, d = trials
    t0 = 1_700_000_000.0

    def result(trial, status, runs, *, attempt=1, reason=None, at=0.0):
        return TrialResult(sweep_id="", trial=trial, status=status, reason=reason, runs=runs, attempt=attempt,
                           serve_command=f"guidellm mock-server --id {trial.id}", started_at=t0 + at,
                           finished_at=t0 + at + 1, **common)

    ok_twice = result(a, Status.ok, [_run(p, r, 900 + 10 * r) for p in a.profiles for r in (0, 1)], at=1)
    lost = result(b, Status.node_lost, [], reason="the node went away", at=2)
    retried = result(b, Status.ok, [_run(p, 0, 700) for p in b.profiles], attempt=2, at=3)
    failing = result(c, Status.oom, [_run("smoke_chat", 0, 500), _run("smoke_chat", 1, 400, Status.low_success_rate, "30 of 48"),
                                     _run("smoke_generation", 0, 0, Status.oom, "CUDA out of memory")],
                     reason="smoke_generation#0: CUDA out of memory", at=4)
    never = result(d, Status.engine_failed_to_start, [], reason="engine exited with code 2 before it was ready", at=5)
    logged = [ok_twice, lost, retried, failing, never]
    return logged, [ok_twice, retried, failing, never]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("store-contract")
    config = tmp / "study.yaml"
    config.write_text(f"name: store-contract\nexperiment: store-contract\nprimary_profile: smoke_chat\ninclude: [{REPO / 'configs' / 'smoke.yaml'}]\n")
    study = load_study(str(config))
    trials = expand(study, GRID)
    assert len(trials) == 4
    from farm.run.sweep_report import build
    from farm.store import tracking

    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    exp_id, sweep_id = tracking.start_sweep(uri, study.experiment_name, study, GRID, trials,
                                            command="farm sweep --grid smoke", repeats=2)
    logged, answers = _results(study, trials)
    for res in logged:
        res.sweep_id = sweep_id
        tracking.log_trial(uri, exp_id, sweep_id, res, None)
    # The end of a sweep: the report and its results file from what MLflow stored.
    report, why, files = build(study, GRID, tracking.load_results(uri, sweep_id), sweep_id, tmp / "report")
    assert report is not None, why
    tracking.finish_sweep(uri, sweep_id, "finished", files)
    return {"uri": uri, "sweep_id": sweep_id, "study": study, "trials": trials, "answers": answers,
            "results_file": tmp / "report" / schema.REPORT_RESULTS}


BACKENDS = {
    "mlflow": lambda s: MlflowStore(s["uri"]),
    "results-file": lambda s: ResultsFileStore(s["results_file"]),
}


@pytest.fixture(params=sorted(BACKENDS))
def store(request, sweep) -> SweepStore:
    return BACKENDS[request.param](sweep)


def test_each_backend_is_a_sweep_store(store):
    assert isinstance(store, SweepStore)
    assert store.where


def test_the_sweep_and_its_metadata(store, sweep):
    sweep_id, study = sweep["sweep_id"], sweep["study"]
    assert store.latest_sweep() == sweep_id
    info = store.sweep(sweep_id)
    assert (info.sweep_id, info.study, info.grid, info.status) == (sweep_id, study.name, GRID, "finished")
    # the name a user reads: the MLflow run's adds when the sweep started (a results file holds no start)
    assert info.name.startswith(f"{study.name} · grid {GRID}")
    assert store.sweep(None) == info  # None: the latest (a results file holds one)
    assert store.sweep("0123456789abcdef0123456789abcdef") is None


def test_the_runs_read_back_as_the_driver_handed_them_to_the_report(store, sweep):
    expected = records_from_trials(sweep["answers"], sweep["study"], grid=GRID, sweep_id=sweep["sweep_id"])
    got = store.records(sweep["sweep_id"], sweep["study"])
    assert got.records == expected.records
    assert got.profiles == expected.profiles
    assert (got.primary_profile, got.study, got.grid, got.sweep_id, got.engine_versions) == (
        expected.primary_profile, expected.study, expected.grid, expected.sweep_id, expected.engine_versions)
    assert {r.trial for r in got.records} == {t.id for t in sweep["trials"]}  # a trial with no run is listed too


def test_the_trials_and_how_each_ended(store, sweep):
    entries = store.trials(sweep["sweep_id"])
    assert [(t.id, t.label, t.status) for t in entries] == [
        (r.trial.id, r.trial.label, r.status.value) for r in sweep["answers"]]  # the retry's last attempt
    assert all(t.reason for t in entries if t.status != Status.ok.value)
    assert finished_trial_ids(store, sweep["sweep_id"]) == {r.trial.id for r in sweep["answers"] if r.status in FINISHED}


def test_what_a_backend_keeps_of_the_grid_and_the_study(store, sweep):
    planned = store.planned_trial_ids(sweep["sweep_id"])
    assert planned is None or planned == {t.id for t in sweep["trials"]}
    study = store.study(sweep["sweep_id"])
    assert study is None or (study.name, list(study.profiles), list(study.grids)) == (
        sweep["study"].name, list(sweep["study"].profiles), list(sweep["study"].grids))


def test_the_report_recommends_the_same_command_from_either_backend(store, sweep):
    report = report_for(store.records(sweep["sweep_id"], sweep["study"]), sweep["study"], grid=GRID)
    best = sweep["answers"][0]
    assert report.selection.recommended.trial == best.trial.id
    assert report.selection.recommended.command == best.serve_command


def test_a_results_file_without_a_sweep_id_is_one_sweep_named_by_its_path():
    store = ResultsFileStore(REPO / "tests" / "fixtures" / "seed-results.json")
    assert store.latest_sweep() == store.where
    assert store.sweep().status == "finished" and store.records().records


def test_a_trial_in_a_results_file_ends_with_its_most_serious_run():
    assert trial_status([Status.ok, Status.low_success_rate, Status.oom]) == Status.oom
    assert trial_status([Status.engine_failed_to_start, Status.engine_failed_to_start]) == Status.engine_failed_to_start
    assert trial_status([Status.ok, Status.ok]) == Status.ok


def test_the_mlflow_layout_is_the_one_stored_sweeps_have():
    """Sweeps outlive the farm that wrote them: these names change only with a migration."""
    assert (schema.KIND_TAG, schema.SWEEP_TAG, schema.TRIAL_TAG, schema.STATUS_TAG, schema.STUDY_TAG, schema.GRID_TAG) == (
        "farm.kind", "farm.sweep_id", "farm.trial_id", "farm.status", "farm.study", "farm.grid")
    assert (schema.REASON_TAG, schema.LOG_TAIL_TAG, schema.PASSES_TAG, schema.SUBMISSION_TAG) == (
        "farm.reason", "farm.log_tail", "farm.passes", "farm.submission_id")
    assert (schema.STUDY_PATH, schema.TRIALS_PATH, schema.RESULT_ARTIFACT, schema.FILES_DIR) == (
        "sweep/study.yaml", "sweep/trials.json", "result.json", "files")
    assert schema.metric_name("chat", "total_tps") == "chat/total_tps"
    assert schema.run_metric_name("chat", "total_tps") == "chat/runs/total_tps"
    assert schema.flag_param("max-num-seqs") == "flag.max-num-seqs"
    # a run's energy (issue 50), per profile like every metric
    assert schema.ENERGY_METRICS == ("energy_j", "power_mean_w", "power_peak_w", "output_tokens_per_j",
                                     "total_tokens_per_j")
    assert schema.COST_METRICS == ("usd_per_m_output_tokens", "usd_per_m_total_tokens")
    # a sweep's driver and its heartbeat, and the mark of a sweep whose driver is gone (issue 51 item 6)
    assert (schema.DRIVER_TAG, schema.HEARTBEAT_TAG, schema.DRIVER_PID_NS_TAG, schema.INTERRUPTED_TAG,
            schema.SWEEP_INTERRUPTED) == ("farm.driver", "farm.driver.heartbeat", "farm.driver.pid_namespace",
                                          "farm.interrupted", "interrupted")
    assert schema.SWEEP_END_STATUS["interrupted"] == "KILLED"
    # one driver a sweep: its lease (issue 51 item 1, farm/store/lease.py)
    assert (schema.LEASE_TAG, schema.LEASE_RELEASED) == ("farm.lease", "released")
    # a search's records on the sweep's run and the memory-fit check on its trials (farm/store/searches.py)
    assert (schema.STRATEGY_TAG, schema.BUDGET_TAG, schema.START_TAG, schema.LOCAL_SEARCH_ESTIMATE_TAG) == (
        "farm.strategy", "farm.budget_gpu_hours", "farm.start", "farm.local_search_estimate")
    assert schema.SEARCH_STRATEGIES == ("halving", "local")
    assert (schema.HALVING_GPU_HOURS_TAG, schema.LOCAL_SEARCH_GPU_HOURS_TAG) == (
        "farm.halving_gpu_hours", "farm.local_search_gpu_hours")
    assert (schema.HALVING_SUMMARY_ARTIFACT, schema.HALVING_PLAN_ARTIFACT, schema.LOCAL_SEARCH_PLAN_ARTIFACT,
            schema.MEMORY_FIT_ARTIFACT) == ("halving.md", "halving.json", "local_search.json", "memory_fit.md")
    assert schema.halving_rung_metric(2) == "halving/rung_2_gpu_hours"
    assert schema.auto_pass_tag(3) == "farm.auto_pass.3"  # --repeats auto: a pass's planned trials
    assert schema.kv_check_tags(1000, 1010, -0.0099, 79) == {
        "farm.kv_tokens_predicted": "1000", "farm.kv_tokens_reported": "1010", "farm.kv_tokens_error_pct": "-0.99",
        "farm.running_requests_predicted": "79"}
    assert schema.kv_check_tags(1000, None, None, None) == {"farm.kv_tokens_predicted": "1000"}
