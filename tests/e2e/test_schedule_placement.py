"""Compile-compatible trials on one node, one after another (farm/analysis/schedule.py) on the
session's simulated cluster (tests/conftest.py, `sim_cluster`): two nodes with one declared GPU
each, two compile groups of two mock trials (the mock's `graph` flag), engines that start slower cold than with their node's cache warm; the
study's next sweep is scheduled at the starts and runs this one measured. Real Ray, real mock
servers and guidellm runs, real MLflow (SQLite)."""

from __future__ import annotations

import pytest
import yaml


pytestmark = pytest.mark.slow

STUDY = {
    "name": "schedule-test", "experiment": "schedule-test", "accelerator_type": "H200",
    "models": {"tiny": {"name": "farm-tiny", "tokenizer": "farm:tiny"}},
    "engines": {"mock": {"ready_timeout_s": 120}},
    "profiles": {"quick": {"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8}, "rate": 1000,
                           "requests": 4, "max_concurrency": 4, "max_seconds": 60}},
    "primary_profile": "quick", "max_retries": 0,
    "grids": {"groups": {"max_concurrent_trials": 4, "blocks": [
        {"engine": "mock", "models": ["tiny"], "flags": {"gpus": 1, "start-s": 3, "warm-start-s": 0.5, "graph": g},
         "axes": {"ttft-ms": [5, 10]}} for g in ("a", "b")]}},
}


def test_compile_compatible_trials_run_on_one_node_in_sequence_and_start_warm(tmp_path, sim_cluster):
    import ray

    from farm.run import driver
    from farm.run.events import SweepEvents
    from farm.run.sweep_plan import SweepPlan
    from farm.study.grid import expand
    from farm.study.load import load_study

    (tmp_path / "study.yaml").write_text(yaml.safe_dump(STUDY))
    study = load_study(tmp_path / "study.yaml")
    trials = expand(study, "groups")
    uri, lines = f"sqlite:///{tmp_path / 'mlflow.db'}", []
    sim_cluster.connect()  # each worker node has a farm cache dir of its own: its own compile cache
    try:
        class Lines(SweepEvents):
            def on_schedule(self, line: str) -> None:
                lines.append(line)

        outcome = driver.run_sweep(SweepPlan(study=study, grid="groups", trials=trials, tracking_uri=uri,
                                             experiment=study.experiment_name, address=sim_cluster.address, resume=None,
                                             repeats=1, workdir=tmp_path / "runs", command="test_schedule_placement"),
                                   Lines())
        # The next sweep of the study (one trial of it) is scheduled at what this one measured.
        driver.run_sweep(SweepPlan(study=study, grid="groups", trials=trials, tracking_uri=uri,
                                   experiment=study.experiment_name, address=sim_cluster.address, resume=None, repeats=1,
                                   workdir=tmp_path / "runs-2", command="test_schedule_placement", only={trials[0].id}),
                         Lines())
    finally:
        ray.shutdown()
    results = outcome.results
    assert sorted(r.trial.id for r in results) == sorted(t.id for t in trials)
    assert all(r.status.value == "ok" for r in results), [(r.trial.label, r.reason) for r in results]
    by_group: dict[str, list] = {}
    for r in results:
        by_group.setdefault(r.trial.flags["graph"], []).append(r)
    nodes = set()
    for group, runs in by_group.items():
        first, second = sorted(runs, key=lambda r: r.started_at)
        assert first.node_id == second.node_id, f"group {group} split over nodes"
        assert second.started_at >= first.finished_at, f"group {group}: one after another on its node's GPU"
        assert first.engine_reported["compile_cache_hit"] is False
        assert second.engine_reported["compile_cache_hit"] is True, f"group {group}: the node's cache was warm"
        nodes.add(first.node_id)
    assert len(nodes) == 2, "each node took a group of its own"
    first, second = lines
    assert first.startswith("schedule: default estimates"), first
    # two cold starts and two warm ones, one quick run each
    assert second.startswith(f"schedule: durations measured in sweep {outcome.sweep_id} (4 runs); starts mock cold "), second
    assert " / warm " in second and "; runs quick " in second, second
