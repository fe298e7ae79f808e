"""One configuration to benchmark: an engine, a model and its flags, run on a set of profiles."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Trial(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Stable id: the same engine, model and flags always give the same id.")
    name: str | None = Field(default=None, description="Name given in the grid (seed steps), if any.")
    engine: str
    model_key: str = Field(description="Key of the model in the study.")
    model: str = Field(description="Model id or path passed to the engine.")
    tokenizer: str | None = None
    flags: dict[str, Any] = Field(default_factory=dict, description="Flags of this trial beyond the engine's required ones.")
    required_flags: dict[str, Any] = Field(default_factory=dict, description="The engine's flags every trial gets.")
    knobs: dict[str, Any] = Field(
        default_factory=dict,
        description="Engine-neutral knobs this trial was built from (already rendered into `flags`); "
        "a record, not part of the id: the id depends only on what the engine is given.",
    )
    profiles: list[str]
    weights: Literal["real", "dummy"] = Field(
        default="real", description="dummy: the engine builds the architecture with random weights (no checkpoint).")
    gpus: int = Field(default=0, ge=0, description="GPUs the engine needs, all on one node.")
    profile_repeats: dict[str, int] = Field(
        default_factory=dict, description="Profile -> runs of it in the first pass, where more than the sweep's repeats.")
    after: str | None = None
    index: int = Field(default=0, description="Position in the grid; ordered grids are read in this order.")

    @property
    def all_flags(self) -> dict[str, Any]:
        return {**self.required_flags, **self.flags}

    @property
    def label(self) -> str:
        return self.name or self.id


NODE_MARK = "@"  # `<trial id>@<node>`: a node control, the same configuration rerun on one node


def node_control_id(trial_id: str, node: str) -> str:
    return f"{trial_id}{NODE_MARK}{node}"


def control_of(trial_id: str) -> str | None:
    """The trial a node control repeats, or None for an ordinary trial."""
    base, sep, _ = trial_id.partition(NODE_MARK)
    return base if sep else None


def trial_id(engine: str, model: str, flags: dict[str, Any], weights: str = "real") -> str:
    """Hash of what defines the server under test; port and host do not belong to it.

    Dummy weights are another server (the same flags measure another thing); real weights leave
    the id as it always was."""
    key: dict[str, Any] = {"engine": engine, "model": model, "flags": flags}
    if weights != "real":
        key["weights"] = weights
    canonical = json.dumps(key, sort_keys=True, default=str)
    return f"{engine}-{hashlib.sha1(canonical.encode()).hexdigest()[:8]}"
