"""The study's `quality` key (issue 49): the gate's task, items and margin in accuracy points.

A good section is read with its defaults; a bad value is refused by `farm sweep --dry-run` in one
line naming the file, the key and the reason, exit 2, nothing written (tests/refusals.py).
"""

from __future__ import annotations

import pytest

from farm.study.load import validate_study
from farm.study.spec import QualitySpec
from refusals import mock_study, refused, run_farm_here

DRY = ["sweep", "--config", "s.yaml", "--grid", "g", "--dry-run"]


def _with(quality: str) -> str:
    return mock_study("quality") + f"quality: {quality}\n"


def test_a_quality_section_is_read_with_its_defaults():
    import yaml

    study = validate_study(yaml.safe_load(_with("{task: eval.jsonl}")), "s.yaml")
    assert study.quality == QualitySpec(task="eval.jsonl", items=300, margin=0.02)
    assert validate_study(yaml.safe_load(mock_study("none")), "s.yaml").quality is None


def test_a_study_with_a_quality_section_dry_runs(tmp_path):
    result, _ = run_farm_here(tmp_path, DRY, {"s.yaml": _with("{task: ./eval.jsonl, items: 500, margin: 0.01}")})
    assert result.exit_code == 0, result.output


BAD = [
    ("margin-zero", "{task: t.jsonl, margin: 0}",
     "quality.margin: expected accuracy points as a fraction above 0 and below 0.5 (0.02 = 2 points), got 0"),
    ("margin-in-percent", "{task: t.jsonl, margin: 2}",
     "quality.margin: expected accuracy points as a fraction above 0 and below 0.5 (0.02 = 2 points), got 2"),
    ("margin-a-word", "{task: t.jsonl, margin: '2%'}",
     "quality.margin: expected accuracy points as a fraction above 0 and below 0.5 (0.02 = 2 points), got '2%'"),
    ("margin-nan", "{task: t.jsonl, margin: .nan}", "quality.margin: expected a finite number, got nan"),
    ("margin-true", "{task: t.jsonl, margin: true}",
     "quality.margin: expected accuracy points as a fraction above 0 and below 0.5 (0.02 = 2 points), got True"),
    ("items-few", "{task: t.jsonl, items: 5}", "quality.items: expected a whole number of items from 20 to 100000, got 5"),
    ("items-fraction", "{task: t.jsonl, items: 300.5}",
     "quality.items: expected a whole number of items from 20 to 100000, got 300.5"),
    ("task-missing", "{margin: 0.02}", "quality.task: required key missing"),
    ("task-empty", "{task: ''}",
     "quality.task: expected the path of a JSONL task file or an lm-eval task's name (one line, not empty)"),
    ("task-not-a-name", "{task: 'gsm8k; rm -rf'}",
     "quality.task: expected a .jsonl file or an lm-eval task's name (letters, digits, '_', '.', '-'), "
     "got 'gsm8k; rm -rf'"),
    ("include-path-for-jsonl", "{task: t.jsonl, include_path: tasks}",
     "quality: include_path is lm-eval's folder of task YAMLs: the task here is a .jsonl file"),
    ("unknown-key", "{task: t.jsonl, itemz: 3}", "quality.itemz: unknown key"),
    ("not-a-mapping", "t.jsonl", "quality: expected a mapping: {task: FILE.jsonl, items: N, margin: F}"),
]


@pytest.mark.parametrize("quality,expected", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_a_bad_quality_value_is_one_line(tmp_path, quality, expected):
    assert refused(tmp_path, DRY, {"s.yaml": _with(quality)}) == f"s.yaml: {expected}"


def test_a_profile_named_as_the_gates_metrics_is_refused(tmp_path):
    """A profile's MLflow metrics are `<profile>/<metric>`, the gate's `quality/<name>`: a profile
    named `quality` would mix the two, so it is refused at load, naming the key."""
    from farm.store import schema
    from farm.study.spec import RESERVED_PROFILE_NAMES

    assert schema.QUALITY_PREFIX in RESERVED_PROFILE_NAMES
    study = mock_study("reserved").replace("profiles: {p:", "profiles: {quality:").replace("primary_profile: p",
                                                                                          "primary_profile: quality")
    assert refused(tmp_path, DRY, {"s.yaml": study}) == (
        "s.yaml: profiles: profile name 'quality' is farm's own: the quality gate's MLflow metrics are named "
        "quality/<name>; name the profile otherwise")
