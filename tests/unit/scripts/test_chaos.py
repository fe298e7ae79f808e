"""bench/chaos.py counts right: on a real SQLite store holding one sweep whose child runs are known
(a trial stored once, twice, not at all, cut off while logging, out of retries on a transient
failure, dropped by a resume and stored again, a recorded failure, a run of no grid trial), its
count says which trials are recorded once, lost and duplicated."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from mlflow.tracking import MlflowClient

from farm.store import schema as S

CHAOS = Path(__file__).resolve().parents[3] / "bench" / "chaos.py"


def _chaos():
    spec = importlib.util.spec_from_file_location("bench_chaos", CHAOS)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _store(tmp_path: Path, children: list[tuple[str, str | None, bool]]) -> tuple[str, str]:
    """A store with one sweep run and its child runs (trial id, status tag or None, deleted)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    c = MlflowClient(uri)
    exp = c.create_experiment("chaos", artifact_location=str(tmp_path / "artifacts"))
    sweep = c.create_run(exp, tags={S.KIND_TAG: S.KIND_SWEEP}).info.run_id
    for trial_id, status, deleted in children:
        tags = {S.PARENT_TAG: sweep, S.KIND_TAG: S.KIND_TRIAL, S.SWEEP_TAG: sweep, S.TRIAL_TAG: trial_id}
        run = c.create_run(exp, tags={**tags, **({S.STATUS_TAG: status} if status else {})}).info.run_id
        if deleted:
            c.delete_run(run)
    other = c.create_run(exp, tags={S.KIND_TAG: S.KIND_SWEEP}).info.run_id  # another sweep's trial: not counted
    c.create_run(exp, tags={S.PARENT_TAG: other, S.KIND_TAG: S.KIND_TRIAL, S.SWEEP_TAG: other, S.TRIAL_TAG: "c",
                            S.STATUS_TAG: "ok"})
    return uri, sweep


def test_the_count_of_a_store_with_known_duplicates_and_losses(tmp_path):
    chaos = _chaos()
    uri, sweep = _store(tmp_path, [
        ("a", "ok", False),                                            # once
        ("b", "ok", False), ("b", "ok", False),                        # duplicated: stored twice
        # c: never stored                                              # lost
        ("d", None, False),                                            # lost: cut off while logging
        ("e", "connection_error", False),                              # lost: transient, no final answer
        ("f", None, True), ("f", "ok", False),                         # once: the resume dropped the cut-off run
        ("g", "engine_crashed", False),                                # once, a recorded failure
        ("h", "ok", False), ("h", None, False),                        # duplicated: a second run beside the answer
        ("zz", "ok", False),                                           # of no grid trial
    ])
    count = chaos.count_store(uri, sweep, ["a", "b", "c", "d", "e", "f", "g", "h"])
    assert (count.trials, count.once, count.lost, count.duplicated) == (8, 3, 3, 2)
    assert count.lost_ids == ["c", "d", "e"] and count.duplicated_ids == ["b", "h"]
    assert count.failed == 1 and count.strays == 1
    assert count.once + count.lost + count.duplicated == count.trials  # each trial in exactly one


def test_a_clean_sweep_counts_every_trial_once(tmp_path):
    chaos = _chaos()
    uri, sweep = _store(tmp_path, [("a", "ok", False), ("b", "oom", False)])
    count = chaos.count_store(uri, sweep, ["a", "b"])
    assert (count.once, count.lost, count.duplicated, count.failed, count.strays) == (2, 0, 0, 1, 0)


def test_the_table_sums_each_fault_kind(tmp_path):
    chaos = _chaos()
    its = [chaos.Iteration(n=1, kind="driver", hit=True, resumes=1, finished=True, seconds=40,
                           count=chaos.Count(trials=3, once=3)),
           chaos.Iteration(n=2, kind="server", hit=True, resumes=2, finished=True, seconds=60,
                           count=chaos.Count(trials=3, once=2, duplicated=1, duplicated_ids=["x"]))]
    lines = chaos.table(its).splitlines()
    assert lines[2] == "| driver | 1 | 1 | 3 | 3 | 0 | 0 | 0 | 1 (1) | 1 | 0 | 40 |"
    assert lines[3] == "| server | 1 | 1 | 3 | 2 | 0 | 1 | 0 | 2 (2) | 1 | 0 | 60 |"
    assert lines[4] == "| all | 2 | 2 | 6 | 5 | 0 | 1 | 0 | 3 (2) | 2 | 0 | 50 |"
    (finding,) = chaos.findings(its)
    assert finding.startswith("iteration 2 (server: ): lost [], duplicated ['x']")
