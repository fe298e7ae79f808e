"""A dry run says when the commands it prints name a local model directory this machine lacks
(a fresh clone has no `.models/`), instead of printing them without a word."""

from __future__ import annotations

from farm.run.dry_run import missing_model_notes
from farm.study.grid import expand
from farm.study.load import load_study
from conftest import REPO


def test_a_missing_model_directory_is_named_once(tmp_path):
    study = load_study(str(REPO / "configs" / "h200-dummy.yaml"))
    trials = expand(study, "seed")
    path = trials[0].model
    notes = missing_model_notes([t.model_copy(update={"model": str(tmp_path / "absent")}) for t in trials])
    assert notes == [f"note: model directory {tmp_path / 'absent'} does not exist here: the commands below name it; "
                     "make it first (the study file says how) or run the sweep where it exists"]
    assert missing_model_notes([t.model_copy(update={"model": str(tmp_path)}) for t in trials]) == []
    assert path.endswith(".models/qwen3.5-35b-a3b-shape")


def test_a_hub_model_is_not_a_directory_to_check():
    assert missing_model_notes(expand(load_study(), "seed")) == []
