"""Expand a named grid of a study into trials: cartesian product per block, exclusions, stable ids."""

from __future__ import annotations

import itertools
from typing import Any

from farm.engines import get_engine
from farm.errors import SpecError
from farm.spec import GridBlock, Study, check_grid_name
from farm.trial import Trial, trial_id


def _matches(combo: dict[str, Any], rule: dict[str, Any]) -> bool:
    return all(key in combo and combo[key] == value for key, value in rule.items())


def _block_combos(block: GridBlock) -> list[dict[str, Any]]:
    names = list(block.axes)
    combos = []
    for values in itertools.product(*(block.axes[n] for n in names)):
        combo = {**block.flags, **dict(zip(names, values))}
        if any(_matches(combo, rule) for rule in block.exclude):
            continue
        combos.append(combo)
    return combos


def expand(study: Study, grid: str) -> list[Trial]:
    """All trials of `grid`, in grid order, duplicates (same id) kept once."""
    check_grid_name(study, grid)
    spec = study.grids[grid]
    profiles = study.grid_profiles(grid)
    trials: list[Trial] = []
    seen: dict[str, str] = {}
    for b, block in enumerate(spec.blocks):
        engine = get_engine(block.engine)
        engine_spec = study.engines[block.engine]
        combos = _block_combos(block)
        if block.name and len(combos) * len(block.models) > 1:
            raise SpecError("a named block must expand to exactly one trial", file=study.source,
                            key=f"grids.{grid}.blocks[{b}].name")
        for model_key in block.models:
            model = study.models[model_key]
            for combo in combos:
                flags = {k: v for k, v in combo.items()}
                all_flags = {**engine_spec.flags, **flags}
                try:
                    gpus = engine.gpus(all_flags)
                except ValueError as exc:
                    raise SpecError(str(exc), file=study.source, key=f"grids.{grid}.blocks[{b}]") from None
                tid = trial_id(block.engine, model.name, all_flags)
                if tid in seen:
                    continue
                seen[tid] = block.name or tid
                trials.append(
                    Trial(
                        id=tid,
                        name=block.name,
                        engine=block.engine,
                        model_key=model_key,
                        model=model.name,
                        tokenizer=model.tokenizer,
                        flags=flags,
                        required_flags=dict(engine_spec.flags),
                        profiles=profiles,
                        gpus=gpus,
                        after=block.after,
                        index=len(trials),
                    )
                )
    if not trials:
        raise SpecError("the grid expands to no trials (every combination excluded)", file=study.source,
                        key=f"grids.{grid}")
    names = {t.name for t in trials if t.name}
    for t in trials:
        if t.after and t.after not in names:
            raise SpecError(f"'after' names unknown step '{t.after}'", file=study.source, key=f"grids.{grid}.blocks[{t.index}].after")
    return trials
