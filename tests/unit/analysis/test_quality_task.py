"""farm's built-in quality task (farm/analysis/quality_task.py): the {id, prompt, answer} JSONL
read through the input boundary, the study's items taken in file order, exact-answer scoring."""

from __future__ import annotations

import json

import pytest
import yaml

from farm.analysis.quality_task import TaskItem, is_correct, normalize_answer, read_task, task_path
from farm.errors import UserError
from farm.study.load import validate_study
from refusals import mock_study


def _write(tmp_path, lines: list[str], name: str = "eval.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_first_items_in_file_order(tmp_path):
    rows = [json.dumps({"id": f"q{i}", "prompt": f"{i}+1=", "answer": str(i + 1)}) for i in range(50)]
    path = _write(tmp_path, rows[:10] + [""] + rows[10:])
    items = read_task(path, items=25)
    assert [i.id for i in items] == [f"q{i}" for i in range(25)]
    assert items[3] == TaskItem(id="q3", prompt="3+1=", answer="4")
    assert len(read_task(path)) == 50


def test_numbers_as_ids_and_answers_are_read_as_text(tmp_path):
    path = _write(tmp_path, ['{"id": 7, "prompt": "3*4=", "answer": 12}'])
    assert read_task(path) == [TaskItem(id="7", prompt="3*4=", answer="12")]


BAD = [
    ("not-json", ['{"id": "a", "prompt": "x"'], "line 1: not valid JSON"),
    ("not-an-object", ['["a", "x", "y"]'], 'line 1: expected a JSON object {"id", "prompt", "answer"}'),
    ("missing-answer", ['{"id": "a", "prompt": "x"}'], "line 1: required key 'answer' missing"),
    ("unknown-key", ['{"id": "a", "prompt": "x", "answer": "y", "label": 1}'], "line 1: unknown key 'label'"),
    ("empty-prompt", ['{"id": "a", "prompt": " ", "answer": "y"}'], "line 1: 'prompt' must be text, not empty"),
    ("list-answer", ['{"id": "a", "prompt": "x", "answer": [1]}'], "line 1: 'answer' must be text or a whole number"),
    ("id-twice", ['{"id": "a", "prompt": "x", "answer": "y"}', '{"id": "a", "prompt": "z", "answer": "w"}'],
     "line 2: id 'a' is given twice (also line 1)"),
]


@pytest.mark.parametrize("lines,expected", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_a_bad_task_is_one_line_naming_the_file_and_line(tmp_path, lines, expected):
    path = _write(tmp_path, lines)
    with pytest.raises(UserError) as exc:
        read_task(path, shown="eval.jsonl")
    assert exc.value.line().startswith(f"eval.jsonl: {expected}")
    assert "\n" not in exc.value.line()


def test_fewer_items_than_the_study_asks_are_refused(tmp_path):
    path = _write(tmp_path, ['{"id": "a", "prompt": "x", "answer": "y"}'])
    with pytest.raises(UserError, match="the task has 1 item; the study's quality.items asks for 20"):
        read_task(path, items=20)


def test_the_task_path_is_relative_to_the_study_file(tmp_path):
    study = validate_study(yaml.safe_load(mock_study("q") + "quality: {task: data/eval.jsonl}\n"), "s.yaml")
    study._source = str(tmp_path / "studies" / "s.yaml")
    assert task_path(study) == (tmp_path / "studies" / "data" / "eval.jsonl").resolve()


@pytest.mark.parametrize("completion,answer,right", [
    ("42", "42", True), (" 42\nthen more text", "42", True), ("42 ", " 42", True), ("4 2", "4  2", True),
    ("43", "42", False), ("", "42", False), ("42.0", "42", False), ("The answer is 42", "42", False),
])
def test_an_answer_is_exact_after_normalizing(completion, answer, right):
    assert is_correct(TaskItem(id="x", prompt="p", answer=answer), completion) is right
    assert normalize_answer("\n\n") == ""
