"""The study file: what to benchmark (models, engines, profiles) and the named grids to sweep.

Validated with pydantic (`extra="forbid"`) before anything starts; every error names the file
and the key path. A study may `include` other YAML files (profiles or grids shared between
studies); their top-level mappings are merged under the including file's own keys.

The study is split by concern: the sections (farm/study/sections.py: models, engines,
profiles), the grids (farm/study/grid_spec.py), and here the `Study` that joins them and checks
their references. Reading a file (includes, relative paths, the engine registry's names) is
farm/study/load.py.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, Union

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from farm.errors import SpecError
from farm.inputs import price_problem, safe_name_problem

from farm.strict import Strict
from farm.study.grid_spec import GridBlock, GridSpec
from farm.study.knobs import KNOBS, KnobError, parse_knob
from farm.study.trial import model_identity
from farm.study.sections import (CapacitySpec, DataSpec, EngineSpec, FlagValue, ModelSpec, ProfileSpec, SkipUnsupported, SLOSpec,
                                 _check_accelerator, flag_identity, normalize_flag_name)

ENGINES_CONTEXT = "engines"  # validation context: the names of the registered engines

__all__ = ["CapacitySpec", "DataSpec", "EngineSpec", "FlagValue", "GridBlock", "GridSpec", "ModelSpec", "ProfileSpec", "QualitySpec",
           "ReferenceSpec",
           "SkipUnsupported", "SLOSpec", "Study", "check_grid_name", "normalize_flag_name"]


class ReferenceSpec(Strict):
    """Another study's results to set farm's numbers beside (the seed document's), by trial name."""

    results: str = Field(description="Results file in the seed-results.json format; relative to the study file.")
    label: str = Field(default="reference", description="How the report names it.")
    profiles: dict[str, str] = Field(
        default_factory=dict, description="farm profile -> the reference's profile, where the names differ.")
    note: str | None = Field(default=None, description="What differs between the two (versions, weights, data).")


class QualitySpec(Strict):
    """The quality gate (farm/analysis/quality_gate.py): the evaluation every trial that changes
    numerics answers, beside its reference, and the accuracy loss the study accepts as the same."""

    task: str = Field(description=(
        "The evaluation: a JSONL file in farm's built-in format, one {\"id\", \"prompt\", \"answer\"} per line "
        "(greedy completion, exact answer), relative to the study file (farm/analysis/quality_task.py)."))
    include_path: str | None = Field(default=None, description=(
        "An lm-eval task's folder of local task YAMLs (lm_eval --include_path), relative to the study file; only "
        "where `task` names an lm-eval task rather than a .jsonl file."))
    max_tokens: int = Field(default=32, ge=1, le=4096, description=(
        "Tokens each greedy answer may take (the built-in task's completions; an lm-eval task's own "
        "generation settings otherwise)."))
    items: int = Field(default=300, ge=20, le=100_000, description=(
        "Items of the task each gated trial and its reference answer (the first N, in the file's order): "
        "300 tell a 2-point margin apart only when the two disagree on few items (bench/quality/README.md)."))
    margin: float = Field(default=0.02, gt=0, lt=0.5, description=(
        "Accuracy points (a fraction: 0.02 = 2 points) within which a gated trial whose paired difference's "
        "(1 - 2 alpha) interval lies is equivalent to its reference; worse beyond it is refused only when significant."))

    @model_validator(mode="before")
    @classmethod
    def _mapping(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError("expected a mapping: {task: FILE.jsonl, items: N, margin: F}")
        return data

    @field_validator("margin", mode="before")
    @classmethod
    def _margin(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 0.5:
            raise ValueError(f"expected accuracy points as a fraction above 0 and below 0.5 (0.02 = 2 points), "
                             f"got {value!r}")
        return value

    @field_validator("items", mode="before")
    @classmethod
    def _items(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or not 20 <= value <= 100_000:
            raise ValueError(f"expected a whole number of items from 20 to 100000, got {value!r}")
        return value

    @field_validator("task")
    @classmethod
    def _task(cls, value: str) -> str:
        if not value.strip() or "\n" in value or "\x00" in value:
            raise ValueError("expected the path of a JSONL task file or an lm-eval task's name (one line, not empty)")
        value = value.strip()
        if not value.endswith(".jsonl") and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", value):
            raise ValueError(f"expected a .jsonl file or an lm-eval task's name (letters, digits, '_', '.', '-'), "
                             f"got {value!r}")
        return value

    @model_validator(mode="after")
    def _include_only_for_lm_eval(self) -> "QualitySpec":
        if self.include_path is not None and self.harness != "lm-eval":
            raise ValueError("include_path is lm-eval's folder of task YAMLs: the task here is a .jsonl file")
        return self

    @property
    def harness(self) -> str:
        """`farm`: the built-in JSONL task; `lm-eval`: a task of lm-eval-harness (farm[quality])."""
        return "farm" if self.task.endswith(".jsonl") else "lm-eval"


class Study(Strict):
    name: str
    experiment: str | None = Field(default=None, description="MLflow experiment; default the study name.")
    description: str = ""
    models: dict[str, ModelSpec]
    engines: dict[str, EngineSpec]
    profiles: dict[str, ProfileSpec]
    grids: dict[str, GridSpec]
    primary_profile: str
    engine_comparison_profile: str | None = None
    baseline: str | None = Field(default=None, description="Trial name or id of the baseline; default the engine-default trial.")
    min_success_rate: float = Field(default=0.99, ge=0, le=1)
    max_concurrent_trials: int = Field(default=4, gt=0)
    max_retries: int = Field(default=2, ge=0)
    repeats: Union[int, Literal["auto"]] = Field(
        default=1,
        description="Runs per trial and profile, or 'auto': a first pass of 3, then more runs only for the "
        "leader and the trials whose decision against it is still open, until every decision is made or `max_runs` "
        "is spent.",
    )
    max_runs: int | None = Field(
        default=None, gt=0,
        description="Run budget of repeats 'auto': benchmark runs (one profile, one repeat) the whole sweep may "
        "make, first pass included; default three times the first pass.",
    )
    equivalence_margin: float = Field(
        default=0.03, gt=0, lt=1,
        description="Two trials whose throughput ratio's (1 - 2 alpha) interval lies inside [1/(1+m), 1+m] are "
        "equivalent (the same within ±m, symmetric on the ratio scale): a decision as final as a significant "
        "difference (farm/analysis/stats). A fraction: 0.03 = ±3 %.",
    )
    deciding_metric: Literal["total_tps", "steady_tps"] = Field(
        default="total_tps",
        description="The throughput that ranks and decides (farm/analysis/definitions.py): total_tps, tokens over the "
        "run's whole duration (the seed's number); steady_tps, tokens per second while the client held its full "
        "concurrency, ramp-up and drain left out (a run without such a window has none and cannot decide).",
    )
    strategy: Literal["grid", "halving", "local"] = Field(
        default="grid",
        description="grid: every trial of the grid, as planned; halving: successive halving over the grid, short "
        "runs first, only trials not significantly worse than the leader go on (farm/analysis/halving.py); "
        "local: a guarded local search from `start` (farm/analysis/local_search.py).",
    )
    start: str | None = Field(
        default=None,
        description="With strategy local: where the search starts, a trial of the grid (name or id) or the serve "
        "command run today (`vllm serve MODEL --flag ...`).",
    )
    repair_start: bool = Field(
        default=True,
        description="With strategy local: where the start cannot start here (its requests at once above what the "
        "engine holds, predicted or named by its failed start), search from farm's repair of it, labelled so "
        "(true), or stop with why (false).",
    )
    budget_gpu_hours: float | None = Field(
        default=None, gt=0, le=1_000_000,
        description="With strategy halving: GPU-hours the sweep may spend in all (engine starts and runs, as the "
        "records count them), checked before each rung; none = no limit.",
    )
    accelerator_type: str | None = Field(
        default=None,
        description="GPU model every GPU trial must run on, as Ray names it (e.g. 'H200'), or `auto`: the one GPU "
        "model the cluster has, read when the sweep starts (results are per GPU model: the sweep stores the name it "
        "ran on); an engine's own `accelerator_type` overrides it; `farm sweep --accelerator` overrides both.",
    )
    compile_cache: str | None = Field(
        default=None,
        description="Where trials share engine compile caches (actors/compile_cache.py): a directory every node sees "
        "(kept across sweeps and machines, evicted by size), or `ray` for Ray's object store within the sweep; "
        "default: Ray's object store on a cluster of several nodes, the node's own cache on one.",
    )
    dummy_output_dependent: Literal["skip", "speed"] = Field(
        default="skip",
        description="A trial on dummy weights whose speed depends on what the model outputs (speculative "
        "decoding): skip = recorded as not_measurable with the reason, its engine never started; speed = one "
        "run of the primary profile alone, for its drafting overhead (never the full profiles).",
    )
    reference: ReferenceSpec | None = Field(
        default=None, description="Results of another study to set beside farm's in the report (by trial name).")
    quality: QualitySpec | None = Field(
        default=None, description="The quality gate: the task every trial that changes numerics is checked on, "
        "beside its reference, and the accuracy margin; none = quality not checked.")
    prices: dict[str, float] | None = Field(
        default=None, description="Dollars per GPU-hour per accelerator type as Ray names it ({H100: 2.5, H200: 3.5}): "
        "each trial's dollars per million tokens and the sweep's own GPU-hours are priced at them (farm looks "
        "nothing up); `--price H100=2.5` overrides one; none = costs not computed.")
    _source: str | None = PrivateAttr(default=None)

    _accel = field_validator("accelerator_type")(lambda cls, v: _check_accelerator(v))

    @model_validator(mode="after")
    def _default_accelerator(self) -> "Study":
        for engine in self.engines.values():
            if engine.accelerator_type is None:
                engine.accelerator_type = self.accelerator_type
        return self

    @field_validator("prices", mode="before")
    @classmethod
    def _prices(cls, prices: Any) -> Any:
        if isinstance(prices, dict):
            for key, value in prices.items():
                problem = price_problem(str(key), value)
                if problem:
                    raise _RefError(f"prices.{key}", problem)
        return prices

    @model_validator(mode="after")
    def _budget_needs_halving(self) -> "Study":
        if self.budget_gpu_hours is not None and self.strategy not in ("halving", "local"):
            raise _RefError("budget_gpu_hours", "only with strategy: halving or local (a grid sweep runs every "
                            "trial, whatever the budget)")
        if self.strategy == "local" and not self.start:
            raise _RefError("start", "strategy local starts from a trial or a serve command: set start (or --from)")
        if self.start is not None and self.strategy != "local":
            raise _RefError("start", "only with strategy: local")
        return self

    @field_validator("repeats", mode="before")
    @classmethod
    def _repeats(cls, value: Any) -> Any:
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            return value
        raise ValueError(f"expected a whole number >= 1 or 'auto', got {value!r}")

    @field_validator("models", mode="before")
    @classmethod
    def _model_shorthand(cls, models: Any) -> Any:
        if isinstance(models, dict):
            return {k: ({"name": v} if isinstance(v, str) else v) for k, v in models.items()}
        return models

    @model_validator(mode="after")
    def _safe_names(self) -> "Study":
        # Names that end up in file and folder names, or name where a sweep lands: one safe path
        # component each (farm/inputs.py SAFE_NAME_RULE), refused here before anything is written.
        named: list[tuple[str, str, Any]] = [("name", "study name", self.name)]
        if self.experiment is not None:
            named.append(("experiment", "experiment name", self.experiment))
        named += [("profiles", "profile name", p) for p in self.profiles]
        named += [("grids", "grid name", g) for g in self.grids]
        for gname, grid in self.grids.items():
            if grid.experiment is not None:
                named.append((f"grids.{gname}.experiment", "experiment name", grid.experiment))
            named += [(f"grids.{gname}.blocks[{b}].name", "trial name", block.name)
                      for b, block in enumerate(grid.blocks) if block.name is not None]
        for key, what, value in named:
            problem = safe_name_problem(value, what)
            if problem:
                raise _RefError(key, problem)
        for profile in self.profiles:
            if profile in RESERVED_PROFILE_NAMES:
                raise _RefError("profiles", f"profile name '{profile}' is farm's own: the quality gate's MLflow metrics "
                                f"are named {profile}/<name>; name the profile otherwise")
        return self

    @model_validator(mode="after")
    def _cross_refs(self, info: ValidationInfo) -> "Study":
        # The engine registry sits above this module (each engine imports EngineSpec): the loader
        # (farm/study/load.py) hands its names over as validation context.
        known = (info.context or {}).get(ENGINES_CONTEXT)
        for name in self.engines:
            if known is not None and name not in known:
                raise _RefError(f"engines.{name}", f"unknown engine '{name}' (known: {', '.join(sorted(known))})")
        for key, model in self.models.items():
            if model.variant_of is not None:
                base = self.models.get(model.variant_of)
                if base is None:
                    raise _RefError(f"models.{key}.variant_of", f"unknown model '{model.variant_of}' (the study defines: {', '.join(self.models)})")
                if base.variant_of is not None:
                    raise _RefError(f"models.{key}.variant_of", f"'{model.variant_of}' is itself a variant; name the base model")
        seen_local: dict[str, tuple[str, str]] = {}
        for key, model in self.models.items():
            # Trial ids name a local model by its directory's name (farm/study/trial.py): two
            # directories of one name would give two different models one id.
            identity = model_identity(model.name)
            other = seen_local.get(identity)
            if other is not None and other[1] != model.name:
                raise _RefError(f"models.{key}.name", f"'{model.name}' and model '{other[0]}' ('{other[1]}') are two "
                                f"directories of one name: farm tells local models apart by their directory's name; "
                                f"rename one")
            seen_local.setdefault(identity, (key, model.name))
        if self.primary_profile not in self.profiles:
            raise _RefError("primary_profile", f"unknown profile '{self.primary_profile}'")
        for gname, grid in self.grids.items():
            for i, name in enumerate(grid.profiles or []):
                if name not in self.profiles:
                    raise _RefError(f"grids.{gname}.profiles[{i}]", f"unknown profile '{name}'")
            if grid.primary_profile and grid.primary_profile not in (grid.profiles or self.profiles):
                raise _RefError(f"grids.{gname}.primary_profile", f"'{grid.primary_profile}' is not one of the grid's profiles")
            for b, block in enumerate(grid.blocks):
                where = f"grids.{gname}.blocks[{b}]"
                if block.engine not in self.engines:
                    raise _RefError(f"{where}.engine", f"unknown engine '{block.engine}' (the study defines: {', '.join(self.engines)})")
                for name in block.profile_repeats:
                    if name not in (grid.profiles or self.profiles):
                        raise _RefError(f"{where}.profile_repeats.{name}", f"'{name}' is not one of the grid's profiles")
                for m, model in enumerate(block.models):
                    if model not in self.models:
                        raise _RefError(f"{where}.models[{m}]", f"unknown model '{model}' (the study defines: {', '.join(self.models)})")
                # One flag in any spelling (`max_num_seqs`, `--max-num-seqs`): set twice, one value would win silently.
                required = {flag_identity(f): f for f in self.engines[block.engine].flags}
                axes = {flag_identity(f): f for f in block.axes}
                for flag in block.flags:
                    if flag_identity(flag) in axes:
                        raise _RefError(f"{where}.flags.{flag}", f"flag given twice (also the axis "
                                        f"'{axes[flag_identity(flag)]}')")
                for section, names in (("flags", block.flags), ("axes", block.axes)):
                    for flag in names:
                        other = required.get(flag_identity(flag))
                        if other is not None:
                            spelled = f" as '{other}'" if other != flag else ""
                            raise _RefError(f"{where}.{section}.{flag}", f"flag given twice (engine '{block.engine}' "
                                            f"already sets it{spelled})")
                _check_exclude_rules(block, where)
            named: dict[str, int] = {}
            for b, block in enumerate(grid.blocks):
                if block.name is not None and block.name in named:
                    raise _RefError(f"grids.{gname}.blocks[{b}].name", f"'{block.name}' names blocks[{named[block.name]}] "
                                    f"too: a name is one trial ('after' and --trial find it by it)")
                if block.name is not None:
                    named[block.name] = b
        return self

    def grid_profiles(self, grid: str) -> list[str]:
        return list(self.grids[grid].profiles or self.profiles)

    def grid_primary_profile(self, grid: str) -> str:
        g = self.grids[grid]
        return g.primary_profile or (self.primary_profile if self.primary_profile in self.grid_profiles(grid) else self.grid_profiles(grid)[0])

    @property
    def source(self) -> str | None:
        """The file the study was read from."""
        return self._source

    @property
    def experiment_name(self) -> str:
        return self.experiment or self.name

    def grid_experiment(self, grid: str) -> str:
        """The MLflow experiment a sweep of `grid` goes to (`--experiment` aside)."""
        return self.grids[grid].experiment or self.experiment_name


def _check_exclude_rules(block: GridBlock, where: str) -> None:
    """Each exclude rule can match a trial of its block: it names only the block's axes, knobs
    and flags, with values they take (a rule that matches nothing is a typo that silently keeps
    the trials it meant to drop), and is not empty (an empty rule would drop every trial)."""
    values: dict[str, list] = {**{k: [v] for k, v in block.flags.items()}, **block.axes,
                               **{k: [v] for k, v in block.knobs.items()}, **block.knob_axes}
    for i, rule in enumerate(block.exclude):
        if not rule:
            raise _RefError(f"{where}.exclude[{i}]", "an empty rule matches every trial of the block: name the "
                            "axes or knobs whose combination it drops")
        for key, value in rule.items():
            if key not in values:
                raise _RefError(f"{where}.exclude[{i}].{key}", f"'{key}' is no axis, knob or flag of this "
                                f"block: the rule would match nothing")
            if key in KNOBS:
                try:
                    value = parse_knob(key, value)
                except KnobError as exc:
                    raise _RefError(f"{where}.exclude[{i}].{key}", exc.reason) from None
            if not any(_same(value, v) for v in values[key]):
                shown = ", ".join(json.dumps(v, default=str) for v in values[key][:8])
                raise _RefError(f"{where}.exclude[{i}].{key}", f"{json.dumps(value, default=str)} is not a value "
                                f"'{key}' takes in this block ({shown}): the rule would match nothing")


def _same(a: Any, b: Any) -> bool:
    """Equal as the grid compares values (farm/study/grid.py), but `true` is not `1`."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


# The quality gate's MLflow metrics are `quality/<name>` beside each profile's `<profile>/<metric>`
# (farm/store/schema.py: QUALITY_PREFIX): a profile of that name would read as the gate's and the
# gate's as its.
RESERVED_PROFILE_NAMES = ("quality",)


class _RefError(ValueError):
    def __init__(self, key: str, reason: str):
        self.key = key
        self.reason = reason
        super().__init__(f"{key}: {reason}")


def check_grid_name(study: Study, grid: str) -> None:
    if grid not in study.grids:
        raise SpecError(f"unknown grid '{grid}' (the study defines: {', '.join(study.grids)})",
                        file=study.source, key="grids")
