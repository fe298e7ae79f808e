"""One configuration to benchmark: an engine, a model and its flags, run on a set of profiles."""

from __future__ import annotations

import hashlib
import json
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# A node control's id is `<trial id>@<node>` (farm/analysis/plan.py): the id names the run in
# MLflow and on resume. What it repeats is its `node_control_of` field; results stored before
# that field existed say it only in the id, which `legacy_control_of` reads.
NODE_MARK = "@"


def legacy_control_of(trial_id: str) -> str | None:
    """The trial a node control repeats, read from its id (results stored before `node_control_of`)."""
    base, sep, _ = trial_id.partition(NODE_MARK)
    return base if sep else None


class Trial(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Stable id: the same engine, model and flags always give the same id.")
    name: str | None = Field(default=None, description=(
        "Name given in the grid (seed steps), or what sets the trial apart from the grid's other trials "
        "(`ttft-ms=50 itl-ms=10`, farm/study/names.py); shown where a user reads trials, never its identity."))
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
    node_control_of: str | None = Field(
        default=None, description="Set for a node control: the trial this one repeats, pinned to one node (never ranked).")

    @model_validator(mode="before")
    @classmethod
    def _stored_before_node_control_of(cls, data: Any) -> Any:
        if isinstance(data, dict) and "node_control_of" not in data and isinstance(data.get("id"), str):
            control = legacy_control_of(data["id"])
            if control is not None:
                data = {**data, "node_control_of": control}
        return data

    @property
    def all_flags(self) -> dict[str, Any]:
        return {**self.required_flags, **self.flags}

    @property
    def label(self) -> str:
        return self.name or self.id


def node_control_id(trial_id: str, node: str) -> str:
    """A node control's trial id: `<trial id>@<node>` (its own child run in MLflow, resumed on its own)."""
    return f"{trial_id}{NODE_MARK}{node}"


# The trial a node control repeats, read from its id; a record or trial says it in `node_control_of`.
control_of = legacy_control_of


def model_identity(model: str) -> str:
    """What a trial's id knows of its model: a hub id as it is; a local directory by its own name,
    not by where it sits. A study's relative paths are resolved against the study file, so the
    absolute path differs from one checkout or machine to the next; the id must not (a sweep
    started on a GPU node is resumed and reported anywhere). Two local models of one study with
    the same directory name are refused where the study is read (farm/study/spec.py)."""
    if model.startswith(("/", "~")) or PureWindowsPath(model).drive:
        return "local:" + (PurePosixPath(model).name or model)
    return model


def trial_id(engine: str, model: str, flags: dict[str, Any], weights: str = "real") -> str:
    """Hash of what defines the server under test; port and host do not belong to it, nor where a
    local model's files sit (`model_identity`).

    Dummy weights are another server (the same flags measure another thing); real weights leave
    the id as it always was."""
    return _hashed_id(engine, model_identity(model), flags, weights)


def _hashed_id(engine: str, model: str, flags: dict[str, Any], weights: str) -> str:
    key: dict[str, Any] = {"engine": engine, "model": model, "flags": flags}
    if weights != "real":
        key["weights"] = weights
    canonical = json.dumps(key, sort_keys=True, default=str)
    return f"{engine}-{hashlib.sha1(canonical.encode()).hexdigest()[:8]}"
