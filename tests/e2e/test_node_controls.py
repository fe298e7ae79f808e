"""The baseline repeated on every node (node controls), on the session's simulated cluster
(tests/conftest.py, `sim_cluster`: a head that runs no trials, two worker nodes), with real mock
engines, real guidellm and MLflow (SQLite): each control ran on the node it was pinned to, is
never ranked, and the report compares the baseline across the nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeptools import quick_pair_study

pytestmark = pytest.mark.slow

STUDY = quick_pair_study("node-controls", "nodes", 4)


@pytest.fixture(scope="module")
def node_sweep(tmp_path_factory, sim_cluster):
    import ray

    from farm.run import driver
    from farm.run.sweep_plan import SweepPlan
    from farm.study.grid import expand
    from farm.study.load import load_study

    tmp = tmp_path_factory.mktemp("nodes")
    (tmp / "study.yaml").write_text(STUDY)
    study = load_study(tmp / "study.yaml")
    trials = expand(study, "nodes")
    sim_cluster.connect()
    try:
        uri = f"sqlite:///{tmp / 'mlflow.db'}"
        outcome = driver.run_sweep(SweepPlan(study=study, grid="nodes", trials=trials, tracking_uri=uri,
                                             experiment=study.experiment_name, address=sim_cluster.address, resume=None,
                                             repeats=2, workdir=tmp / "runs", command="test_node_controls"))
        yield dict(outcome=outcome, study=study, trials=trials, tmp=tmp,
                   workers={w.node_id for w in sim_cluster.workers})
    finally:
        ray.shutdown()


def test_the_baseline_ran_once_more_on_each_worker_node_it_was_pinned_to(node_sweep):
    from farm.analysis.plan import control_of

    outcome, trials = node_sweep["outcome"], node_sweep["trials"]
    baseline = next(t for t in trials if not t.flags)
    controls = [r for r in outcome.results if control_of(r.trial.id)]
    assert len(outcome.results) == len(trials) + 2
    assert {control_of(r.trial.id) for r in controls} == {baseline.id}
    assert {r.node_id for r in controls} == node_sweep["workers"]  # one on each worker, none on the head
    for r in controls:
        assert r.status.value == "ok" and r.trial.id.endswith(r.node_id[:8])  # the node it names is where it ran


def test_the_report_compares_the_baseline_across_nodes_and_never_ranks_a_control(node_sweep):
    from farm.run.sweep_report import build

    outcome = node_sweep["outcome"]
    report, why, _ = build(node_sweep["study"], "nodes", outcome.results, outcome.sweep_id, Path(node_sweep["tmp"] / "out"))
    assert report is not None, why
    sel = report.selection
    assert sel.nodes is not None and len(sel.nodes.nodes) == 2
    assert all(n.runs >= 2 for n in sel.nodes.nodes)
    controls = [t for t in sel.trials if t.node_control_of]
    assert len(controls) == 2 and not any(t.eligible for t in controls)
    verdict = sel.verdict()
    assert verdict.candidates == 2  # the two trials of the grid, never a control
    assert not any("@" in t for t in verdict.equivalent + [verdict.leader, sel.recommended.trial])
