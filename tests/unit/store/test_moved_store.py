"""A store brought from another machine reads here: the committed H200 store records its artifacts
at the GPU machine's paths (/tmp/farm-h200/store/mlruns/...), and on this machine they name
nothing. farm finds them beside the database; the commands that only read leave the store as it
was; a resumed sweep's store is rewritten once so that its new runs land beside the database."""

from __future__ import annotations

import hashlib
import sqlite3
import tarfile

import pytest

from conftest import REPO, run_farm
from farm.run.preflight import check_resume
from farm.store import location
from farm.store.mlflow_store import MlflowStore
from farm.study.grid import expand
from farm.study.load import load_study

SEED_SWEEP = "aa0e8ed837734ac3bb3a11f5178e8f9e"
SGLANG_SWEEP = "dd5bd9360b9b425f90e4ac5ed298874b"


@pytest.fixture
def moved(tmp_path):
    """The committed H200 store, unpacked under this test's own folder (never at the GPU machine's path)."""
    folder = tmp_path / "somewhere" / "else"
    folder.mkdir(parents=True)
    with tarfile.open(REPO / "bench/h200/store.tgz") as tar:
        tar.extractall(folder, filter="data")
    return folder


def _recorded(db) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [r[0] for r in con.execute("SELECT artifact_uri FROM runs")]
    finally:
        con.close()


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_committed_store_records_paths_of_another_machine(moved):
    # What makes the rest of this file worth having: every location names the GPU machine's folder.
    recorded = _recorded(moved / "mlflow.db")
    assert recorded and all(not str(moved) in uri for uri in recorded)
    assert not any(location.local_path(uri).exists() for uri in recorded)


def test_a_moved_store_is_read_beside_its_database(moved):
    uri = f"sqlite:///{moved / 'mlflow.db'}"
    store = MlflowStore(uri)
    planned = store.planned_trials(SEED_SWEEP)
    assert planned is not None and len(planned) == 6  # the grid's trials, the pending ones too
    assert store.study(SEED_SWEEP).name == "qwen3.5-35b-a3b-h200-dummy"
    results = store.results(SEED_SWEEP)
    assert {r.trial.name for r in results} >= {"engine_vllm_default", "step1_quant_fp8", "step3_performance_mode"}
    assert all(r.runs for r in results if r.status.value == "ok")


def test_status_of_a_moved_store_shows_every_planned_trial_and_writes_nothing(moved):
    db = moved / "mlflow.db"
    # Every trial of the SGLang grid has a child run since 2026-12-04: one is taken out here, so
    # that the sweep has a trial no child run holds, as it had while it ran.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    parent = client.get_run(SGLANG_SWEEP)
    (child,) = client.search_runs([parent.info.experiment_id],
                                  filter_string="params.name = 'sglang_running_512_radix_off'")
    client.delete_run(child.info.run_id)
    before = _digest(db)
    proc = run_farm("status", SGLANG_SWEEP, "--tracking-uri", f"sqlite:///{db}", cwd=moved)
    assert proc.returncode == 0, proc.stderr
    # Every trial of the grid, the ones no child run holds yet too (read from the sweep's trial
    # list, an artifact at the other machine's path): before, a moved store hid them.
    listed = [line for line in proc.stdout.splitlines() if line.startswith("  ")]
    planned = MlflowStore(f"sqlite:///{db}").planned_trials(SGLANG_SWEEP)
    assert len(listed) == len(planned) == 8, proc.stdout
    assert [line.split()[1] for line in listed if line.strip().startswith("pending")] == \
        ["sglang_running_512_radix_off"], proc.stdout
    assert all(any(t.name in line for line in listed) for t in planned)
    assert _digest(db) == before  # a command that reads leaves the store byte for byte as it was


def test_report_of_a_moved_store_reads_its_sweeps(moved, tmp_path):
    db = moved / "mlflow.db"
    before = _digest(db)
    proc = run_farm("report", SEED_SWEEP, SGLANG_SWEEP, "--tracking-uri", f"sqlite:///{db}", "--format", "json",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no study stored" not in proc.stderr
    assert _digest(db) == before


def test_resume_check_matches_the_older_ids_from_any_checkout(moved):
    # The stored sweeps' ids hold the model's absolute path on the GPU machine; today's ids do not.
    # The same trials are found by what they are, and keep the ids they were stored with.
    study = load_study(REPO / "configs/h200-dummy.yaml")
    uri = f"sqlite:///{moved / 'mlflow.db'}"
    store = MlflowStore(uri)
    for grid, sweep in (("seed", SEED_SWEEP), ("sglang", SGLANG_SWEEP)):
        trials = expand(study, grid)
        point = check_resume(uri, sweep, study, grid, trials)
        stored = {t.name: t.id for t in store.planned_trials(sweep)}
        assert {t.name: t.id for t in point.rename(trials)} == stored
        finished = {t.name for t in store.planned_trials(sweep) if t.id in point.finished}
        assert finished == {e.label for e in store.trials(sweep) if e.status is not None}


def test_relocate_rewrites_the_locations_once(moved):
    uri = f"sqlite:///{moved / 'mlflow.db'}"
    moved_now = location.moved_locations(uri)
    assert moved_now and all(str(moved) in new for new in moved_now.values())
    assert location.relocate(uri) == len(moved_now)
    assert all(str(moved / "mlruns") in u for u in _recorded(moved / "mlflow.db"))
    assert location.relocate(uri) == 0  # nothing left to move
    assert len(MlflowStore(uri).planned_trials(SEED_SWEEP)) == 6


def test_a_server_location_is_not_a_local_path():
    assert location.local_path("mlflow-artifacts:/1/abc/artifacts") is None
    assert location.local_path("s3://bucket/1/abc/artifacts") is None
    assert str(location.local_path("file:///x/mlruns/1/abc/artifacts")) == "/x/mlruns/1/abc/artifacts"
