"""`accelerator_type: auto` on the session's simulated cluster (tests/conftest.py, `sim_cluster`: a
head without GPUs, two worker nodes of one declared H200 each): the driver takes the cluster's one
GPU model before anything is placed or stored, the study's GPU trials (real mock engines asking
Ray for a GPU, real guidellm, MLflow on SQLite) run on those nodes, the sweep's stored study names
the model, and a resume of a sweep measured on another model is refused before any trial runs."""

from __future__ import annotations

import pytest
import yaml

pytestmark = pytest.mark.slow

STUDY = {
    "name": "auto-gpu", "experiment": "auto-gpu", "accelerator_type": "auto",
    "models": {"tiny": {"name": "farm-tiny", "tokenizer": "farm:tiny"}},
    "engines": {"mock": {"ready_timeout_s": 120}},
    "profiles": {"quick": {"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8}, "rate": 1000,
                           "requests": 4, "max_concurrency": 4, "max_seconds": 60,
                           "slo": {"min_success_rate": 0.5}}},
    "primary_profile": "quick", "max_retries": 0,
    "grids": {"g": {"max_concurrent_trials": 2, "blocks": [
        {"engine": "mock", "models": ["tiny"], "flags": {"gpus": 1}, "axes": {"ttft-ms": [5, 10]}}]}},
}


def test_auto_runs_on_the_clusters_gpu_model_and_a_resume_on_another_is_refused(tmp_path, sim_cluster):
    import ray
    from mlflow.tracking import MlflowClient

    from farm.analysis.accelerator import resolved
    from farm.errors import UserError
    from farm.run import driver
    from farm.run.events import SweepEvents
    from farm.run.sweep_plan import SweepPlan
    from farm.store import tracking
    from farm.store.mlflow_store import MlflowStore
    from farm.study.grid import expand
    from farm.study.load import load_study

    (tmp_path / "study.yaml").write_text(yaml.safe_dump(STUDY))
    study = load_study(tmp_path / "study.yaml")
    trials = expand(study, "g")
    assert [t.gpus for t in trials] == [1, 1]
    uri, said = f"sqlite:///{tmp_path / 'mlflow.db'}", []
    run = dict(study=study, grid="g", trials=trials, tracking_uri=uri, experiment=study.experiment_name,
               address=sim_cluster.address, repeats=1, command="test_accelerator_auto")

    class Said(SweepEvents):
        def on_accelerator(self, line: str) -> None:
            said.append(line)

    # a sweep of the same study and grid stored as measured on H100 (its parent run alone)
    _, on_h100 = tracking.start_sweep(uri, study.experiment_name, resolved(study, "H100"), "g", trials,
                                      command="elsewhere", repeats=1)
    sim_cluster.connect()
    try:
        first = driver.run_sweep(SweepPlan(resume=None, workdir=tmp_path / "runs-1", **run), Said())
        with pytest.raises(UserError) as refused:
            driver.run_sweep(SweepPlan(resume=on_h100, workdir=tmp_path / "runs-2", **run), Said())
    finally:
        ray.shutdown()
    # the same sweep resumed with nothing left: no Ray, its report per the model it stored
    again = driver.run_sweep(SweepPlan(resume=first.sweep_id, workdir=tmp_path / "runs-3", **run), Said())

    assert said == ["accelerator: H200 (from the cluster)"] * 2
    workers = {w.node_id for w in sim_cluster.workers}
    for outcome in (first, again):
        assert outcome.study.accelerator_type == "H200" and outcome.study.engines["mock"].accelerator_type == "H200"
    results = first.results
    assert sorted(r.trial.id for r in results) == sorted(t.id for t in trials)
    assert sorted(again.skipped) == sorted(t.id for t in trials)
    assert all(r.status.value == "ok" for r in results), [(r.trial.label, r.status.value, r.reason) for r in results]
    assert {r.node_id for r in results} <= workers  # H200 nodes, never the GPU-less head
    # results are per GPU model: the sweep's snapshot and its run name the model auto resolved to
    stored = MlflowStore(uri).study(first.sweep_id)
    assert stored.accelerator_type == "H200" and stored.engines["mock"].accelerator_type == "H200"
    assert MlflowClient(uri).get_run(first.sweep_id).data.tags["farm.accelerator"] == "H200"

    assert refused.value.line() == (
        f"--resume: sweep {on_h100} measured on H100; this cluster's GPUs are H200: results are per GPU model; "
        f"start a new sweep (without --resume) on these GPUs, or resume it on H100 ones")
    assert not list(tracking.trial_runs(uri, on_h100))  # refused before any trial ran
