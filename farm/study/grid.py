"""Expand a named grid of a study into trials: cartesian product per block, exclusions, stable ids.

A block crosses its flag `axes` with its `knob_axes`; engine-neutral knobs (farm/study/knobs.py) are
rendered by the block's engine adapter into that engine's flags, after the `quantization` knob
has picked the model variant. `grid_cost` estimates what a grid costs before it runs.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field

from farm.engines import get_engine
from farm.errors import SpecError
from farm.inputs import quoted
from farm.study.knobs import KNOBS, KnobError, describe, parse_knob
from farm.study.names import readable_names
from farm.study.repeats import first_pass_repeats
from farm.study.sections import flag_identity
from farm.study.spec import GridBlock, Study, check_grid_name
from farm.study.trial import Trial, trial_id


def _matches(combo: dict[str, Any], rule: dict[str, Any]) -> bool:
    for key, value in rule.items():
        if key not in combo:
            return False
        if key in KNOBS:
            try:
                value = parse_knob(key, value)
            except KnobError:
                return False
        if combo[key] != value:
            return False
    return True


def _block_combos(block: GridBlock) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(flags, knobs) of every combination the block keeps, in axis order."""
    flag_names = list(block.axes)
    knob_names = list(block.knob_axes)
    combos = []
    for values in itertools.product(*(block.axes[n] for n in flag_names), *(block.knob_axes[n] for n in knob_names)):
        flags = {**block.flags, **dict(zip(flag_names, values[: len(flag_names)]))}
        knobs = {**block.knobs, **dict(zip(knob_names, values[len(flag_names):]))}
        if any(_matches({**flags, **knobs}, rule) for rule in block.exclude):
            continue
        combos.append((flags, knobs))
    return combos


def resolve_quantization(study: Study, model_key: str, quantization: str | None) -> tuple[str, str | None]:
    """The model to serve for the `quantization` knob, and what remains for the engine to do.

    A variant of the same family (`variant_of`) with that quantization is used as is; an
    unquantized model with no such variant leaves the method to the engine's online
    quantization. Raises `KnobError` when neither can give what was asked.
    """
    if quantization is None:
        return model_key, None
    model = study.models[model_key]
    base = model.variant_of or model_key
    family = [base] + [k for k, m in study.models.items() if m.variant_of == base]
    wanted = None if quantization == "none" else quantization
    for key in family:
        if study.models[key].quantization == wanted:
            return key, None
    if wanted is None:
        raise KnobError("quantization", f"model '{model_key}' has no unquantized variant in the study")
    if model.quantization is not None:
        raise KnobError("quantization", f"model '{model_key}' is already {model.quantization}-quantized and the "
                        f"study has no {wanted} variant of it")
    return model_key, wanted


# The most trials a grid may name (the product of each block's axes and models, summed over its
# blocks, counted before anything is expanded): a sweep of 10,000 trials of a few minutes each is
# weeks of a GPU, far beyond a study's scale, and a product of axes that passes it (a YAML of a
# few kilobytes can name 10^20 combinations) would otherwise hang expansion and `--dry-run`.
MAX_GRID_TRIALS = 10_000
# The most runs of one pass (trials x the grid's profiles): what the cost estimate and the sweep
# walk through; 10,000 trials of 10 profiles each, or fewer trials of more profiles.
MAX_GRID_RUNS = 100_000


def grid_size(block: GridBlock) -> int:
    """Combinations of one block before its exclusions: models x each axis's values."""
    size = len(block.models)
    for values in (*block.axes.values(), *block.knob_axes.values()):
        size *= len(values)
    return size


def check_grid_size(study: Study, grid: str) -> None:
    sizes = [grid_size(block) for block in study.grids[grid].blocks]
    total = sum(sizes)
    if total > MAX_GRID_TRIALS:
        largest = max(range(len(sizes)), key=sizes.__getitem__)
        raise SpecError(f"the grid names {total:,} combinations of its axes before exclusions (blocks[{largest}]: "
                        f"{sizes[largest]:,}); farm expands at most {MAX_GRID_TRIALS:,}: split it into smaller grids "
                        f"or use fewer values per axis", file=study.source, key=f"grids.{grid}")
    profiles = len(study.grid_profiles(grid))
    if total * profiles > MAX_GRID_RUNS:
        raise SpecError(f"the grid plans {total * profiles:,} runs a pass ({total:,} combinations x {profiles:,} "
                        f"profiles); farm plans at most {MAX_GRID_RUNS:,}: give the grid fewer `profiles`",
                        file=study.source, key=f"grids.{grid}")


def expand(study: Study, grid: str) -> list[Trial]:
    """All trials of `grid`, in grid order, duplicates (same id) kept once."""
    check_grid_name(study, grid)
    check_grid_size(study, grid)  # counted, not expanded: a huge product is refused in no time
    spec = study.grids[grid]
    profiles = study.grid_profiles(grid)
    trials: list[Trial] = []
    settings: list[dict[str, Any]] = []  # what each trial was built from, as the study wrote it (its name)
    seen: dict[str, str] = {}
    for b, block in enumerate(spec.blocks):
        where = f"grids.{grid}.blocks[{b}]"
        engine = get_engine(block.engine)
        engine_spec = study.engines[block.engine]
        combos = _block_combos(block)
        if block.name and len(combos) * len(block.models) > 1:
            raise SpecError("a named block must expand to exactly one trial", file=study.source, key=f"{where}.name")
        for block_model in block.models:
            for combo_flags, combo_knobs in combos:
                knobs = {k: v for k, v in combo_knobs.items() if v is not None}
                # by one spelling of each flag (`max_num_seqs` is `max-num-seqs`), as knobs render them
                taken = {**{flag_identity(f): f"grid key {where}.flags" for f in combo_flags},
                         **{flag_identity(f): f"engines.{block.engine}.flags" for f in engine_spec.flags}}
                try:
                    model_key, online = resolve_quantization(study, block_model, knobs.get("quantization"))
                    rendered = engine.render_knobs({**knobs, "quantization": online}, taken)
                except KnobError as exc:
                    if exc.unsupported and block.skips(exc.knob, engine_spec):
                        continue
                    section = "knob_axes" if exc.knob in block.knob_axes else "knobs"
                    raise SpecError(f"engine '{block.engine}' cannot express {exc.knob}={describe(knobs.get(exc.knob))}: "
                                    f"{exc.reason}", file=study.source, key=f"{where}.{section}.{exc.knob}") from None
                model = study.models[model_key]
                if model.weights == "dummy" and not engine.serves_dummy_weights:
                    raise SpecError(f"engine '{block.engine}' has no dummy load format: it cannot serve model "
                                    f"'{model_key}' with weights: dummy", file=study.source, key=f"models.{model_key}.weights")
                flags = {**combo_flags, **rendered}
                all_flags = {**engine_spec.flags, **flags}
                try:
                    engine.check_flags(all_flags)
                    gpus = 0 if engine_spec.device == "cpu" else engine.gpus(all_flags)
                except ValueError as exc:
                    raise SpecError(str(exc), file=study.source, key=where) from None
                tid = trial_id(block.engine, model.name, all_flags, model.weights)
                if tid in seen:
                    continue
                seen[tid] = block.name or tid
                settings.append({"engine": block.engine, "model": block_model, **combo_flags, **knobs})
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
                        knobs=knobs,
                        weights=model.weights,
                        profiles=profiles,
                        profile_repeats=dict(block.profile_repeats),
                        gpus=gpus,
                        after=block.after,
                        index=len(trials),
                    )
                )
    if not trials:
        raise SpecError("the grid expands to no trials (every combination excluded or skipped)", file=study.source,
                        key=f"grids.{grid}")
    # Unnamed trials are named by what sets them apart (farm/study/names.py); the id stays the hash.
    named = readable_names(settings, [t.name for t in trials])
    trials = [t if t.name == n else t.model_copy(update={"name": n}) for t, n in zip(trials, named)]
    names = {t.name for t in trials if t.name}
    for t in trials:
        if t.after and t.after not in names:
            raise SpecError(f"'after' names unknown step '{t.after}'", file=study.source, key=f"grids.{grid}.blocks[{t.index}].after")
    return trials


def select_trials(trials: list[Trial], wanted: tuple[str, ...] | list[str], *, key: str) -> set[str]:
    """Ids of the trials named (by name or id) in `wanted`; a name the grid does not have is an error."""
    by_name = {t.name: t.id for t in trials if t.name}
    ids = {t.id for t in trials}
    out: set[str] = set()
    for name in wanted:
        if name in ids:
            out.add(name)
        elif name in by_name:
            out.add(by_name[name])
        else:
            known = ", ".join([t.name or t.id for t in trials][:12])
            raise SpecError(f"no trial {quoted(name)} in this grid (it has: {known}{', ...' if len(trials) > 12 else ''})",
                            key=key)
    return out


# ---------------------------------------------------------------------------------------
# Cost before running

# Seconds one benchmark run of each profile took in the seed (shared/reference/seed-results.json,
# `runs[].metrics.duration_s`, one H200): the longest measured run of the profile, over both
# engines and all configurations, so the estimate errs high (sharegpt: the slower engine's default
# run; the others: the BF16 baseline).
SEED_PROFILE_SECONDS: dict[str, float] = {
    "sharegpt": 124.99,
    "throughput": 40.37,
    "long_context": 73.72,
    "generation_heavy": 57.74,
}
# Per benchmark run beyond the benchmark itself: guidellm's start and report (about 2 s in-process,
# 17 s as a CLI on 2 cores, DESIGN.md) and the prefix-cache reset.
RUN_OVERHEAD_S = 15.0


class MeasuredDurations(BaseModel):
    """An earlier sweep's durations (farm.analysis.durations measures them from its records)."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="Where they were measured (a sweep id).")
    start_s: dict[str, float] = Field(description="Engine -> median seconds from launch to ready.")
    cold_start_s: dict[str, float] = Field(
        default_factory=dict, description="Engine -> median start of those that compiled from scratch (cache cold).")
    warm_start_s: dict[str, float] = Field(
        default_factory=dict, description="Engine -> median start of those that found the node's compile cache warm.")
    profile_s: dict[str, float] = Field(description="Profile -> median seconds one run of it held its trial.")
    runs: int = Field(description="Runs the medians are taken over.")
    also: list[str] = Field(default_factory=list, description=(
        "Earlier sweeps that measured what `source` did not (a profile, an engine's cold or warm start), "
        "newest first."))

    @property
    def where(self) -> str:
        """Which sweeps these durations come from, as the estimate lines name them."""
        return f"sweep {self.source}" + (f" (then {', '.join(self.also)})" if self.also else "")


class GridCost(BaseModel):
    """What a grid costs at the seed's measured durations (an estimate, printed by `farm sweep --dry-run`)."""

    model_config = ConfigDict(extra="forbid")

    grid: str
    trials: int
    runs: int = Field(description="Benchmark runs: trials x profiles x repeats.")
    gpus_max: int = Field(description="Most GPUs one trial needs on one node.")
    gpu_hours: float = Field(description="Sum over trials of GPUs x (engine start + runs).")
    trial_hours: float = Field(description="Sum over trials of engine start + runs: the time on one slot, serially.")
    trials_by_engine: dict[str, int]
    profile_seconds: dict[str, float] = Field(description="Seconds assumed per run of each profile.")
    profile_sources: dict[str, str] = Field(description="Where each profile's seconds come from.")
    start_overhead_s: dict[str, float] = Field(description="Seconds assumed from launch to ready, per engine, "
                                               "with a cold compile cache.")
    warm_start_s: dict[str, float] = Field(default_factory=dict, description=(
        "Seconds assumed from launch to ready with the node's compile cache warm, per engine: every trial of a "
        "compile group after its first (farm's scheduler keeps a group on one node)."))
    cold_starts: int = Field(default=0, description="Engine starts assumed cold: one per compile group.")
    run_overhead_s: float
    durations_from: str = Field(default="the seed's measured durations", description="Where the durations come from.")

    def line(self) -> str:
        engines = ", ".join(f"{n} {e}" for e, n in self.trials_by_engine.items())
        return (f"{self.grid}: {self.trials} trials ({engines}), {self.runs} runs, up to {self.gpus_max} GPU(s) "
                f"per trial, ~{self.gpu_hours:.1f} GPU-hours at {self.durations_from}; "
                f"{self.cold_starts} cold engine start(s), one per compile group")


def _profile_seconds(study: Study, name: str, durations: Mapping[str, float], source: str) -> tuple[float, str]:
    if name in durations:
        return float(durations[name]), source
    profile = study.profiles[name]
    if profile.max_seconds:
        return float(profile.max_seconds), "the profile's max_seconds (no measured duration)"
    return 600.0, "assumed 600 s (no measured duration, no max_seconds)"


def run_seconds(study: Study, trial: Trial, run_overhead_s: float = RUN_OVERHEAD_S,
                measured: MeasuredDurations | None = None) -> float:
    """Estimated seconds of a trial's runs (its first pass) at the seed's durations, or where
    `measured` has a profile, at its measured wall time (which holds the client overhead)."""
    repeats = first_pass_repeats(study.repeats)
    walls = measured.profile_s if measured is not None else {}
    return repeats * sum(walls[p] if p in walls else (_profile_seconds(study, p, SEED_PROFILE_SECONDS, "")[0]
                                                      + run_overhead_s) for p in trial.profiles)


def compile_group(trial: Trial) -> str | None:
    """The compile cache a trial's engine start fills and later starts of the group reuse on the
    same node (`Engine.compile_key`); None where the engine keeps none."""
    return get_engine(trial.engine).compile_key(trial.model, trial.all_flags, trial.weights)


def trial_starts(trial: Trial, measured: MeasuredDurations | None = None) -> tuple[float, float]:
    """A trial's engine start, (cold compile cache, warm): measured where an earlier sweep saw that
    kind of start of its engine, the engine's estimate otherwise (`Engine.start_estimate_s`)."""
    cold, warm = get_engine(trial.engine).start_estimate_s(trial.all_flags)
    if measured is None:
        return cold, warm
    e = trial.engine
    if e not in measured.cold_start_s and e not in measured.warm_start_s:
        # Starts whose cache state went unrecorded say nothing of a cold-warm gap: they stand in
        # for both only where the estimate has no gap either (an engine without a compile cache).
        if e in measured.start_s and cold == warm:
            return measured.start_s[e], measured.start_s[e]
        return cold, warm
    return measured.cold_start_s.get(e, cold), measured.warm_start_s.get(e, warm)


def grid_cost(study: Study, grid: str, durations: Mapping[str, float] | None = None,
              run_overhead_s: float = RUN_OVERHEAD_S, trials: list[Trial] | None = None,
              measured: MeasuredDurations | None = None, durations_from: str | None = None) -> GridCost:
    """Size and estimated GPU-hours of `grid`: each trial starts its engine once, cold for the
    first trial of its compile group (`Engine.compile_key`) and warm for the rest, as the
    scheduler runs a group on one node (`trial_starts`: the engine's estimates, or what `measured`
    holds of its starts), then runs every profile `study.repeats` times (for 'auto': the first pass; later
    passes are bounded by the study's run budget; a capacity profile's search at most its
    `max_runs`). `trials`: the grid already expanded (a 10,000-trial grid takes a second to expand)."""
    repeats = first_pass_repeats(study.repeats)
    from_store = durations is not None and durations_from is not None
    source = durations_from if from_store else "seed-results.json (longest measured run)"
    durations = SEED_PROFILE_SECONDS if durations is None else durations
    trials = expand(study, grid) if trials is None else trials
    profiles = study.grid_profiles(grid)
    seconds = {p: _profile_seconds(study, p, durations, source) for p in profiles}
    start_s: dict[str, float] = {}
    warm_s: dict[str, float] = {}
    gpu_s = trial_s = 0.0
    by_engine: dict[str, int] = {}
    # A capacity profile runs its search once, up to its run budget, whatever the repeats.
    runs_of = {p: spec.capacity.max_runs if (spec := study.profiles[p]).capacity else repeats for p in study.profiles}
    groups: set[str] = set()
    cold_count = 0
    for trial in trials:
        cold, warm = trial_starts(trial, measured)
        start_s.setdefault(trial.engine, cold)
        warm_s.setdefault(trial.engine, warm)
        key = compile_group(trial)
        first = key is None or key not in groups
        if key is not None:
            groups.add(key)
        cold_count += first and cold != warm  # an engine without a compile cache has no cold start
        one = (cold if first else warm) + sum(runs_of[p] * (seconds[p][0] + run_overhead_s) for p in trial.profiles)
        trial_s += one
        gpu_s += one * trial.gpus
        by_engine[trial.engine] = by_engine.get(trial.engine, 0) + 1
    return GridCost(
        grid=grid,
        trials=len(trials),
        runs=sum(runs_of[p] for t in trials for p in t.profiles),
        gpus_max=max(t.gpus for t in trials),
        gpu_hours=round(gpu_s / 3600, 2),
        trial_hours=round(trial_s / 3600, 2),
        trials_by_engine=by_engine,
        profile_seconds={p: s for p, (s, _) in seconds.items()},
        profile_sources={p: src for p, (_, src) in seconds.items()},
        start_overhead_s=start_s,
        warm_start_s=warm_s,
        cold_starts=cold_count,
        run_overhead_s=run_overhead_s,
        **({"durations_from": durations_from} if from_store else {}),
    )


def grid_costs(study: Study, expanded: Mapping[str, list[Trial]] | None = None,
               measured: MeasuredDurations | None = None) -> dict[str, GridCost]:
    """`grid_cost` of every grid of the study; `expanded`: grids whose trials are already known;
    `measured`: an earlier sweep's durations (a profile or engine it did not measure keeps the
    default). A measured run's wall time holds its client overhead already."""
    expanded = expanded or {}
    if measured is None:
        return {name: grid_cost(study, name, trials=expanded.get(name)) for name in study.grids}
    durations = {**{p: s + RUN_OVERHEAD_S for p, s in SEED_PROFILE_SECONDS.items()}, **measured.profile_s}
    out = {}
    for name in study.grids:
        trials = expanded.get(name) or expand(study, name)
        profiles, engines = set(study.grid_profiles(name)), {t.engine for t in trials}
        hit = (profiles & set(measured.profile_s)) | (engines & set(measured.start_s))
        if not hit:
            out[name] = grid_cost(study, name, trials=trials)
            continue
        partial = not (profiles <= set(measured.profile_s) and engines <= set(measured.start_s))
        out[name] = grid_cost(study, name, durations, run_overhead_s=0.0, trials=trials, measured=measured,
                              durations_from=f"durations measured in {measured.where} ({measured.runs} runs"
                                             + ("; the rest the seed's)" if partial else ")"))
    return out
