"""A sweep in pieces over machines that do not last (a lent GPU, a spot node): the first piece
measures step `a` on machine m1; the machine is gone, and the resume that measures step `b` runs
on m2 with `--control a`, a copy of `a` run first beside `b`. Each piece is its own simulated
cluster (`ray.cluster_utils.Cluster`) whose one worker node carries the machine label the sweep
records (`farm.machine`); real mock engines, real guidellm, MLflow on SQLite. The report compares
`b` with `a` within m2 (the copy's runs are `a`'s there), never ranks the copy, and without the
copy the same two trials could not be compared at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_farm
from sweeptools import quick_pair_study

pytestmark = pytest.mark.slow

STUDY = quick_pair_study("resume-control", "steps", 1, steps=True)


def _piece(tmp: Path, machine: str, **kwargs):
    """One piece of the sweep on a fresh one-node cluster labelled `machine`."""
    import ray
    from ray.cluster_utils import Cluster

    from farm.run import driver
    from farm.run.driver import ACTOR_CPUS
    from farm.run.sweep_plan import SweepPlan
    from farm.study.grid import expand
    from farm.study.load import load_study
    from raynodes import LOOPBACK_ENV, set_env

    study = load_study(tmp / "study.yaml")
    restore = set_env(LOOPBACK_ENV)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=ACTOR_CPUS, labels={"farm.machine": machine},
                         env_vars={"FARM_CACHE_DIR": str(tmp / f"cache-{machine}")})
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        return study, driver.run_sweep(SweepPlan(study=study, grid="steps", trials=expand(study, "steps"),
                                                 tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}",
                                                 experiment=study.experiment_name, address=cluster.address, repeats=3,
                                                 workdir=tmp / "runs", command="test_resume_control", **kwargs))
    finally:
        ray.shutdown()
        cluster.shutdown()
        restore()


@pytest.fixture(scope="module")
def pieces(tmp_path_factory):
    from farm.store import tracking
    from farm.study.grid import expand
    from farm.study.load import load_study

    tmp = tmp_path_factory.mktemp("resume-control")
    (tmp / "study.yaml").write_text(STUDY)
    ids = {t.name: t.id for t in expand(load_study(tmp / "study.yaml"), "steps")}
    _, first = _piece(tmp, "m1", resume=None, only={ids["a"]})
    # the piece ends as `farm sweep` ends one: the sweep partial, its driver's lease let go
    tracking.finish_sweep(f"sqlite:///{tmp / 'mlflow.db'}", first.sweep_id, "partial", [])
    # a copy of a trial not measured yet: refused before anything starts (farm sweep as a user runs it)
    early = run_farm("sweep", "--config", str(tmp / "study.yaml"), "--grid", "steps", "--resume", first.sweep_id,
                     "--control", "b", "--tracking-uri", f"sqlite:///{tmp / 'mlflow.db'}",
                     "--workdir", str(tmp / "runs"), cwd=tmp)
    # the dry run of that resume says the copy runs first (an option it shows, not one it drops)
    preview = run_farm("sweep", "--config", str(tmp / "study.yaml"), "--grid", "steps", "--resume", first.sweep_id,
                       "--control", "a", "--trial", "b", "--dry-run", "--tracking-uri", f"sqlite:///{tmp / 'mlflow.db'}",
                       cwd=tmp)
    study, second = _piece(tmp, "m2", resume=first.sweep_id, only={ids["b"]}, copies=(ids["a"],))
    tracking.finish_sweep(f"sqlite:///{tmp / 'mlflow.db'}", second.sweep_id, "finished", [])
    return dict(study=study, outcome=second, ids=ids, tmp=tmp, early=early, preview=preview)


def test_a_copy_of_a_trial_not_measured_yet_is_refused_in_one_line(pieces):
    early = pieces["early"]
    assert early.returncode == 2 and "Traceback" not in early.stderr
    assert early.stderr.strip().splitlines()[-1] == (
        "error: --control: trial b has not measured in sweep "
        f"{pieces['outcome'].sweep_id}, so there is nothing to repeat; run it with --trial")


def test_the_dry_run_of_the_resume_names_the_copy(pieces):
    preview = pieces["preview"]
    assert preview.returncode == 0, preview.stderr
    assert "; first, a copy of a as a control on the machine the resume runs on (--control)" in preview.stdout


def test_the_resume_runs_the_copy_first_on_its_own_machine(pieces):
    ids, results = pieces["ids"], pieces["outcome"].results
    by_id = {r.trial.id: r for r in results}
    assert set(by_id) == {ids["a"], ids["b"], f"{ids['a']}@control1"}
    copy = by_id[f"{ids['a']}@control1"]
    assert copy.status.value == "ok" and copy.trial.node_control_of == ids["a"] and copy.trial.name == "a@control1"
    assert by_id[ids["a"]].machine.label == "m1"
    assert copy.machine.label == by_id[ids["b"]].machine.label == "m2"
    assert copy.machine.key != by_id[ids["a"]].machine.key
    first_run = lambda r: min(run.started_at for run in r.runs)  # noqa: E731
    assert first_run(copy) < first_run(by_id[ids["b"]])  # first: the resume's trials then run beside it


def test_the_step_is_decided_within_the_machine_the_copy_shared(pieces):
    from farm.report.text import render
    from farm.run.sweep_report import build

    outcome, ids = pieces["outcome"], pieces["ids"]
    report, why, _ = build(pieces["study"], "steps", outcome.results, outcome.sweep_id, pieces["tmp"] / "out")
    assert report is not None, why
    (step,) = [s for s in report.selection.steps if s.trial == ids["b"]]
    diff = step.delta
    m2 = next(r.machine.key for r in outcome.results if r.trial.id == ids["b"])
    assert diff.machines == "within" and diff.machines_note.startswith(f"within machine {m2}")
    assert diff.p_value is not None and diff.n_a == diff.n_b == 3
    assert report.selection.verdict().candidates == 2  # the copy is never ranked
    assert f"within machine {m2}" in render(report, "markdown")


def test_without_the_copy_the_two_machines_share_nothing(pieces):
    from farm.analysis import stats as fstats
    from farm.analysis.records import records_from_trials
    from farm.analysis.select import build_table
    from farm.analysis.selection.machines import cell_blocks

    outcome, ids = pieces["outcome"], pieces["ids"]
    records = records_from_trials(outcome.results, pieces["study"], grid="steps", sweep_id=outcome.sweep_id)
    cells = {c.trial: c for c in build_table(records, "total_tps", 0.9).on("quick")}
    alone = fstats.blocked_difference(cell_blocks(cells[ids["b"]], "total_tps"), cell_blocks(cells[ids["a"]], "total_tps"))
    assert alone.machines == "no_shared_control"
