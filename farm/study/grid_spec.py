"""The study's `grids`: named grids of blocks (an engine, models, flags, axes, knobs, rules)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from farm.study.knobs import KnobError, parse_knob

from farm.strict import Strict
from farm.study.sections import EngineSpec, FlagValue, SkipUnsupported, _check_skip, _normalize_flags


class GridBlock(Strict):
    engine: str
    models: list[str] = Field(min_length=1, description="Keys of the study's `models`.")
    flags: dict[str, FlagValue] = Field(default_factory=dict, description="Flags fixed for every trial of this block.")
    axes: dict[str, list[FlagValue]] = Field(
        default_factory=dict, description="Flag -> values; the block expands to their cartesian product."
    )
    exclude: list[dict[str, FlagValue]] = Field(
        default_factory=list, description="Combinations to drop: a trial matching every key of one entry is skipped."
    )
    name: str | None = Field(default=None, description="Name of the trial (only for blocks that expand to one trial).")
    after: str | None = Field(default=None, description="Stepwise studies: the named step this one builds on.")
    knobs: dict[str, Any] = Field(
        default_factory=dict,
        description="Engine-neutral knobs fixed for every trial of this block (see farm/study/knobs.py); "
        "the engine adapter renders them into its own flags.",
    )
    knob_axes: dict[str, list[Any]] = Field(
        default_factory=dict, description="Knob -> values, crossed with `axes`; null means the engine default."
    )
    skip_unsupported: SkipUnsupported = Field(
        default=False,
        description="Where this block's engine cannot express a knob value, drop that trial instead of failing: "
        "true for all knobs, or a list of knob names.",
    )
    profile_repeats: dict[str, int] = Field(
        default_factory=dict,
        description="Profile -> runs of it for this block's trials where more than the study's `repeats` are wanted "
        "(e.g. {throughput: 3} for the two configurations a study compares most closely); first pass only.",
    )

    @field_validator("profile_repeats")
    @classmethod
    def _repeats_positive(cls, value: dict[str, int]) -> dict[str, int]:
        for name, n in value.items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"{name}: expected a whole number >= 1, got {n!r}")
        return value

    _normalize = field_validator("flags", "axes", mode="before")(lambda cls, v: _normalize_flags(v or {}))
    _skip = field_validator("skip_unsupported")(lambda cls, v: _check_skip(v))

    @field_validator("knobs")
    @classmethod
    def _parse_knobs(cls, knobs: dict[str, Any]) -> dict[str, Any]:
        return {name: _knob(name, value) for name, value in knobs.items()}

    @field_validator("knob_axes")
    @classmethod
    def _parse_knob_axes(cls, axes: dict[str, list]) -> dict[str, list]:
        out = {}
        for name, values in axes.items():
            if not values:
                raise ValueError(f"knob axis '{name}' has no values")
            out[name] = [_knob(name, value) for value in values]
        return out

    @model_validator(mode="after")
    def _knob_twice(self) -> "GridBlock":
        for name in self.knobs:
            if name in self.knob_axes:
                raise ValueError(f"knob '{name}' given twice (in knobs and knob_axes)")
        return self

    def skips(self, knob: str, engine: "EngineSpec | None" = None) -> bool:
        """Whether an inexpressible value of `knob` drops the trial (block or engine says so)."""
        return any(s is True or (isinstance(s, list) and knob in s)
                   for s in (self.skip_unsupported, engine.skip_unsupported if engine else False))

    @field_validator("axes")
    @classmethod
    def _non_empty_axes(cls, axes: dict[str, list]) -> dict[str, list]:
        for name, values in axes.items():
            if not values:
                raise ValueError(f"axis '{name}' has no values")
        return axes

    @field_validator("exclude", mode="before")
    @classmethod
    def _normalize_exclude(cls, rules: list) -> list:
        if not isinstance(rules, list):
            return rules  # pydantic's own check says a list was expected
        return [_normalize_flags(rule) if isinstance(rule, dict) else rule for rule in rules]


def _knob(name: str, value: Any) -> Any:
    try:
        return parse_knob(name, value)
    except KnobError as exc:
        raise ValueError(str(exc)) from None


class GridSpec(Strict):
    description: str = ""
    profiles: list[str] | None = Field(default=None, description="Profiles every trial runs; default all of the study's.")
    primary_profile: str | None = None
    blocks: list[GridBlock] = Field(min_length=1)
    ordered: bool = Field(default=False, description="The blocks are the ordered steps of a stepwise study.")
    max_concurrent_trials: int | None = Field(default=None, gt=0)
    experiment: str | None = Field(default=None, description=(
        "MLflow experiment of this grid's sweeps, where not the study's: "
        "the smoke grids run the mock engine, not the model the study is named after."))
