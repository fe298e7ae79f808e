"""Machines as blocks on a real sweep: a simulated cluster (`ray.cluster_utils.Cluster`) of two
worker nodes labelled as two machines (`farm.machine`, the Ray node label a user sets with `ray
start --labels`), one trial's room each, so the two trials of the grid run at once on different
machines; the baseline is repeated on each node (node controls). Real mock engines, real guidellm,
MLflow on SQLite. Every run records its machine; the report compares the two trials across
machines only where the two sides ran on one machine: the baseline's node control, a copy of it,
counts as the baseline's runs on its machine, and the report says which machine decided."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeptools import quick_pair_study

pytestmark = pytest.mark.slow

STUDY = quick_pair_study("machine-blocks", "blocks", 2)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    import ray
    from ray.cluster_utils import Cluster

    from farm.run import driver
    from farm.run.sweep_plan import SweepPlan
    from farm.run.driver import ACTOR_CPUS
    from farm.study.grid import expand
    from farm.study.load import load_study
    from raynodes import LOOPBACK_ENV, set_env

    tmp = tmp_path_factory.mktemp("blocks")
    (tmp / "study.yaml").write_text(STUDY)
    study = load_study(tmp / "study.yaml")
    trials = expand(study, "blocks")
    restore = set_env(LOOPBACK_ENV)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        # One trial's CPUs a node: the two trials, started together, run on different machines.
        workers = {name: cluster.add_node(num_cpus=ACTOR_CPUS, labels={"farm.machine": name},
                                          env_vars={"FARM_CACHE_DIR": str(tmp / f"cache-{name}")})
                   for name in ("m1", "m2")}
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        outcome = driver.run_sweep(SweepPlan(study=study, grid="blocks", trials=trials,
                                             tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}",
                                             experiment=study.experiment_name, address=cluster.address, resume=None,
                                             repeats=3, workdir=tmp / "runs", command="test_machine_blocks"))
        yield dict(outcome=outcome, study=study, tmp=tmp, node_of={w.node_id: n for n, w in workers.items()})
    finally:
        ray.shutdown()
        cluster.shutdown()
        restore()


def test_each_run_records_the_machine_its_node_is_labelled_as(sweep):
    results = sweep["outcome"].results
    by_label: dict[str, set[str]] = {}
    for tr in results:
        assert tr.status.value == "ok", tr.reason
        assert tr.machine.label == sweep["node_of"][tr.node_id]  # the label of the node it ran on
        assert {run.machine for run in tr.runs} == {tr.machine.key}
        by_label.setdefault(tr.machine.label, set()).add(tr.machine.key)
    # one host, two labelled nodes: two machines, one key each
    assert set(by_label) == {"m1", "m2"} and all(len(keys) == 1 for keys in by_label.values())
    assert by_label["m1"] != by_label["m2"]


def test_the_report_compares_the_trials_within_the_machine_where_the_baselines_copy_ran(sweep):
    from farm.report.text import render, report_json
    from farm.run.sweep_report import build

    outcome = sweep["outcome"]
    report, why, _ = build(sweep["study"], "blocks", outcome.results, outcome.sweep_id, Path(sweep["tmp"] / "out"))
    assert report is not None, why
    sel = report.selection
    ranked = {r.trial.id: r for r in outcome.results if not r.trial.node_control_of}
    verdict = sel.verdict()
    assert verdict.candidates == 2 and len(verdict.comparisons) >= 1
    lead = verdict.comparisons[0]
    same = ranked[lead.a].machine.key == ranked[lead.b].machine.key
    if same:  # both trials happened to run on one machine: compared there
        assert lead.machines in ("one_machine", "within")
    else:  # on two machines: within the other trial's machine, where the baseline's node control ran
        # beside it (a copy's runs are its trial's on the copy's machine); the baseline's own runs, on
        # the other machine, are left out and said so
        base = next(r.trial.node_control_of for r in outcome.results if r.trial.node_control_of)
        other = lead.a if lead.b == base else lead.b
        assert lead.machines == "within" and lead.p_value is not None
        assert lead.machines_note.startswith(f"within machine {ranked[other].machine.key}")
        assert "on machines the other never ran on" in lead.machines_note
        assert "within machine" in render(report, "markdown")
    assert report_json(report)["verdicts"][0]["comparisons"][0]["machines"] == lead.machines
    assert any(n.startswith("Runs come from 2 machines") for n in report.notes)
