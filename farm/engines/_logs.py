"""Reading numbers out of engine logs and flags: helpers every engine adapter may use (engines never import each other)."""

from __future__ import annotations

import re
from typing import Any


def _int_flag(flags: dict[str, Any], *names: str, default: int = 1) -> int:
    for name in names:
        value = flags.get(name)
        if value not in (None, False):
            try:
                return int(value)
            except (TypeError, ValueError):
                raise ValueError(f"--{name} must be a whole number, got {value!r}") from None
    return default


# ---------------------------------------------------------------------------------------
# Reading numbers out of engine logs (shared with the SGLang adapter)


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _as_int(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def per_rank_sum(matches: list[tuple[str, float]]) -> float | None:
    """Sum of the first value each data-parallel rank reported (`rank` '' = rank 0).

    Tensor-parallel workers of one rank repeat the same line; data-parallel ranks each own a
    KV cache and a scheduler, so their capacities add up.
    """
    first: dict[str, float] = {}
    for rank, value in matches:
        first.setdefault(rank or "0", value)
    return sum(first.values()) if first else None


def _first(pattern: str, text: str, flags: int = 0) -> re.Match | None:
    return re.search(pattern, text, flags)


def _int_list(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", text)]
