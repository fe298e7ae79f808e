"""A speculative trial on dummy weights is recorded as not measurable, with its reason, and its
engine is never started; `dummy_output_dependent: speed` runs it once, on the primary profile alone.
(The H200's MTP trial drafted for 18 minutes with `Accepted: 0 tokens` in every acceptance line.)"""

from __future__ import annotations

from conftest import REPO, run_farm
from farm.analysis.results import Status
from farm.run import driver
from farm.run.preflight import check_resume
from farm.store import tracking
from farm.store.mlflow_store import MlflowStore
from farm.study.grid import expand
from farm.study.load import load_study

MTP = "step_spec_decoding_mtp4"


def _seed(tmp_path):
    study = load_study(REPO / "configs/h200-dummy.yaml")
    trials = expand(study, "seed")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    exp_id, sweep_id = tracking.start_sweep(uri, "t", study, "seed", trials, command="farm sweep", repeats=1)
    return study, trials, uri, exp_id, sweep_id


def test_the_mtp_trial_on_dummy_weights_is_recorded_and_not_started(tmp_path):
    study, trials, uri, exp_id, sweep_id = _seed(tmp_path)
    events = []
    todo = driver._unmeasurable(study, trials, primary="sharegpt_synthetic", sweep_id=sweep_id, exp_id=exp_id,
                                tracking_uri=uri, on_event=lambda kind, job, result: events.append((kind, result)))
    assert MTP not in {t.name for t in todo} and len(todo) == len(trials) - 1  # the other five still start
    (kind, result), = events
    assert kind == "finished" and result.status == Status.not_measurable and not result.runs
    assert "reject every draft token" in result.reason and "--speculative-config" in result.reason
    stored = {e.label: e for e in MlflowStore(uri).trials(sweep_id)}
    assert stored[MTP].status == "not_measurable" and "dummy weights" in stored[MTP].reason
    # ...and a resumed sweep counts it as done: it is never started later either
    mtp = next(t for t in trials if t.name == MTP)
    assert mtp.id in check_resume(uri, sweep_id, study, "seed", trials).finished


def test_speed_asked_for_runs_the_primary_profile_once(tmp_path):
    study, trials, uri, exp_id, sweep_id = _seed(tmp_path)
    study = study.model_copy(update={"dummy_output_dependent": "speed"})
    todo = driver._unmeasurable(study, trials, primary="sharegpt_synthetic", sweep_id=sweep_id, exp_id=exp_id,
                                tracking_uri=uri, on_event=lambda *a: None)
    mtp = next(t for t in todo if t.name == MTP)
    assert mtp.profiles == ["sharegpt_synthetic"] and mtp.profile_repeats == {}
    assert all(len(t.profiles) == 4 for t in todo if t.name != MTP)
    assert not MlflowStore(uri).results(sweep_id)  # nothing recorded: it will run


def test_dry_run_says_it_will_not_start():
    proc = run_farm("sweep", "--config", str(REPO / "configs/h200-dummy.yaml"), "--grid", "seed", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    block = proc.stdout.split(MTP, 1)[1].split("\n\n", 1)[0]
    assert "not started: not measurable on dummy weights" in block
