"""Readable trial names: what tells a trial apart from the other trials of its grid.

A trial's id is a hash (farm/study/trial.py): stable, but `mock-dd59a71a` says nothing to the
person reading a report, a plot or MLflow's runs table. A trial the study names (a named block,
a seed step) keeps its name; every other trial is named by the settings the study varies and
in which it differs from the grid's other trials, as the study wrote them (`ttft-ms=50
itl-ms=10`, knobs by their engine-neutral name). The id stays the trial's identity; the name is
only what is shown.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

# Where a trial lacks a setting the others have: the engine's own default applies.
DEFAULT = "default"


def show_value(value: Any) -> str:
    """A setting's value as a user writes it in a study: `true`, `0.9`, `{"method":"mtp"}`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def readable_names(settings: Sequence[Mapping[str, Any]], given: Sequence[str | None]) -> list[str | None]:
    """A name for each trial: `given[i]` where the study named it, otherwise `key=value` for each
    key of `settings[i]` whose value is not the same in every trial (key order: as first met).

    `settings[i]`: what trial i was built from, keyed so that two trials differ in a key exactly
    when they differ in that setting (the engine, the model's key, the flags and knobs the grid
    set). A grid of one trial, or trials that differ in nothing shown, keeps None: the id says as
    much. Names stay unique: a derived name another trial already has is left None (its id shows).
    """
    keys: list[str] = []
    for s in settings:
        keys.extend(k for k in s if k not in keys)

    def shown(s: Mapping[str, Any], k: str) -> str:
        # an axis value null is the engine's default, as a trial without the setting is: not "None"
        return DEFAULT if s.get(k) is None else show_value(s[k])

    varying = [k for k in keys if len({shown(s, k) for s in settings}) > 1]
    out: list[str | None] = []
    for s, name in zip(settings, given):
        if name is None and varying:
            name = " ".join(f"{k}={shown(s, k)}" for k in varying)
        out.append(name)
    taken: dict[str, int] = {}
    for name in out:
        if name is not None:
            taken[name] = taken.get(name, 0) + 1
    return [n if n is None or taken[n] == 1 or n in given else None for n in out]


def readable_ids(text: str, names: dict[str, str]) -> str:
    """`text` with each trial id that `names` knows replaced by the trial's name: the planners
    (halving, local search) speak in ids, which they store; a person reads names."""
    return re.sub(r"\b[a-z0-9_]+-[0-9a-f]{8}\b", lambda m: names.get(m.group(0), m.group(0)), text)
