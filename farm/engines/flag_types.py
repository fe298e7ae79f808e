"""The types and ranges of the engine flags farm renders or reads itself.

An engine module declares them (`Engine.flag_types`: flag -> `FlagType`) for the flags whose
values farm uses (GPU counts, memory fractions, the model length the memory-fit model reads) or
renders from a knob (booleans, JSON objects). A study's value of such a flag is checked when the
study is read (farm/study/load.py), so that `tensor-parallel-size: -2` or
`gpu-memory-utilization: 90` is one line naming the file and key, not a trial that fails on the
GPU or a prediction made from a nonsense number. Flags farm neither renders nor reads stay the
engine's to judge (its own `invalid_flags` failure).

Pure: no engine-specific names here; each engine module lists its own flags.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from farm.study.sections import flag_identity


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _json_object(value: Any) -> bool:
    if isinstance(value, dict):
        return True
    if isinstance(value, str):  # written as the command line would give it: '{"method": "mtp", ...}'
        try:
            return isinstance(json.loads(value), dict)
        except ValueError:
            return False
    return False


@dataclass(frozen=True)
class FlagType:
    """What a flag's value must be, in the words an error uses ("a whole number >= 1")."""

    what: str
    accepts: Callable[[Any], bool]


POSITIVE_INT = FlagType("a whole number >= 1", lambda v: _whole(v) and v >= 1)
NON_NEGATIVE_INT = FlagType("a whole number >= 0", lambda v: _whole(v) and v >= 0)
WHOLE = FlagType("a whole number", _whole)
POSITIVE_NUMBER = FlagType("a number above 0", lambda v: _number(v) and v > 0)
NON_NEGATIVE_NUMBER = FlagType("a number >= 0", lambda v: _number(v) and v >= 0)
FRACTION = FlagType("a fraction above 0 and at most 1 (0.9 = 90 %)", lambda v: _number(v) and 0 < v <= 1)
BOOLEAN = FlagType("true or false", lambda v: isinstance(v, bool))
JSON_OBJECT = FlagType("a JSON object (a mapping, or its JSON text)", _json_object)


def type_error(types: Mapping[str, FlagType], name: str, value: Any) -> str | None:
    """Why `value` is not what flag `name` takes (None when it is, or when farm does not type it).
    A null value means "the engine's default" (the flag is not rendered) and is always accepted."""
    expected = types.get(flag_identity(name))
    if expected is None or value is None or expected.accepts(value):
        return None
    shown = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"expected {expected.what}, got {shown}"
