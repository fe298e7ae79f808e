"""farm's built-in quality task: a JSONL file of items with exact answers, and how an answer is scored.

One JSON object a line: `{"id": "...", "prompt": "...", "answer": "..."}` (the shape of the
tiny trained model's eval set under scripts/; an id or answer written as a number is read as its
text). The gate sends each prompt as a plain completion at greedy decoding; the answer is the
completion's first line, stripped, with runs of spaces made one: correct when it equals the
item's answer so normalized. The items a study uses are the file's first `quality.items`, in the
file's order, so every trial of a sweep, and every sweep of the study, answers the same ones.
The file is read through farm's input boundary (farm/inputs.py): size-bounded, strict JSON, one
line naming the file, the line and the reason for anything wrong.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field

from farm.errors import UserError
from farm.inputs import load_json, quoted, read_text
from farm.strict import Strict
from farm.study.spec import Study

TASK_MAX_BYTES = 256 << 20  # 256 MiB: a task of a few hundred thousand items; the gate reads hundreds
FIELDS = ("id", "prompt", "answer")


class TaskItem(Strict):
    id: str = Field(description="The item's id: two runs are paired on it.")
    prompt: str
    answer: str = Field(description="The exact answer (compared normalized: `normalize_answer`).")


def task_path(study: Study) -> Path:
    """The study's task file (`quality.task`), relative to the study file where it is relative."""
    if study.quality is None:
        raise ValueError("the study has no quality section")
    path = Path(study.quality.task).expanduser()
    if not path.is_absolute() and study.source:
        path = Path(study.source).resolve().parent / path
    return path


def _text(value: object) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (str, int)):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return None


def read_task(path: str | Path, *, items: int | None = None, shown: str | None = None) -> list[TaskItem]:
    """The task's items (the first `items` of them, in the file's order); a `UserError` names the
    file, the line and what is wrong (not JSON, a missing or mistyped field, an id given twice, fewer
    items than asked)."""
    shown = shown or str(path)
    text = read_text(path, what="quality task", max_bytes=TASK_MAX_BYTES, shown=shown)
    out: list[TaskItem] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if items is not None and len(out) == items:
            break
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            data = load_json(line, shown=shown)
        except UserError as exc:
            raise UserError(exc.reason, file=shown, key=where) from None
        if not isinstance(data, dict):
            raise UserError('expected a JSON object {"id", "prompt", "answer"}', file=shown, key=where)
        extra = sorted(set(data) - set(FIELDS))
        if extra:
            raise UserError(f"unknown key {quoted(extra[0])} (an item has {', '.join(FIELDS)})", file=shown, key=where)
        values = {}
        for field in FIELDS:
            if field not in data:
                raise UserError(f"required key '{field}' missing", file=shown, key=where)
            value = _text(data[field]) if field != "prompt" else (data[field] if isinstance(data[field], str) else None)
            if value is None or (field != "answer" and not value.strip()):
                raise UserError(f"'{field}' must be {'text' if field == 'prompt' else 'text or a whole number'}"
                                f"{'' if field == 'answer' else ', not empty'}, got {quoted(repr(data[field]))}",
                                file=shown, key=where)
            values[field] = value
        if values["id"] in seen:
            raise UserError(f"id {quoted(values['id'])} is given twice (also line {seen[values['id']]}): items are "
                            "paired by id", file=shown, key=where)
        seen[values["id"]] = number
        out.append(TaskItem(**values))
    if items is not None and len(out) < items:
        raise UserError(f"the task has {len(out)} item{'' if len(out) == 1 else 's'}; the study's quality.items "
                        f"asks for {items}", file=shown)
    if not out:
        raise UserError("the task has no items", file=shown)
    return out


def normalize_answer(text: str) -> str:
    """What is compared: the first line, stripped, runs of whitespace made one space."""
    first = text.strip().split("\n", 1)[0] if text.strip() else ""
    return re.sub(r"\s+", " ", first).strip()


def is_correct(item: TaskItem, completion: str) -> bool:
    """Whether a completion answers the item exactly (both normalized)."""
    return normalize_answer(completion) == normalize_answer(item.answer)
