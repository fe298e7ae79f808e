"""Same server, another name: a trial whose engine overrode the knob that set it apart from a trial
already measured, and so runs exactly that trial's server.

On the H200, SGLang 0.5.16 with its radix cache on caps `--max-running-requests 512` (and 256) back
to 79 for the hybrid Qwen3.5 model, its default there: the start log's limits (79 requests at
once, 1,392,614 KV-cache tokens, 398 mamba slots, a batch budget of 8,192) are the default trial's,
to the token. Measuring it again costs 11-14 GPU-minutes a trial and measures the default under
another name. So once the engine is ready, the actor compares what its log says with each finished
trial of the sweep that differs from it only in the overridden knobs; when every limit the two logs
state is equal, the trial ends as `same_server`, naming that trial, and nothing runs. The
comparison needs the engine's own word (its log), never a prediction: a knob the engine honoured,
or a limit that differs by one token, and the trial is measured as usual.

Pure: the driver hands each job the candidates (`candidates`), the actor asks `same_server`.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from pydantic import BaseModel, ConfigDict, Field

from farm.analysis.limits import LIMITS, effective_limits, overrides_text, value_text
from farm.analysis.results import Status, TrialResult
from farm.engines import get_engine
from farm.study.trial import Trial, model_identity

# What an engine's start log states of the server it runs (Engine.reported_capacity's keys):
# two trials are one server only where every one of these that either log states is equal.
SERVER_KEYS: dict[str, str] = {
    **LIMITS,
    "mamba_cache_size": "mamba state slots",
    "max_model_len": "context length",
    "prefix_caching": "prefix cache",
}


class Twin(BaseModel):
    """A finished, measured trial as a later trial's actor compares itself with it."""

    model_config = ConfigDict(extra="forbid")

    trial_id: str
    label: str
    flags: dict[str, Any] = Field(description="The trial's every flag (Trial.all_flags).")
    gpu_name: str | None = None
    reported: dict[str, Any] = Field(default_factory=dict, description="Its log's SERVER_KEYS.")


class SameServer(NamedTuple):
    """The measured trial whose server a trial's engine ran, and the reason its record gives."""

    twin: Twin
    reason: str


def candidates(trial: Trial, finished: Iterable[TrialResult]) -> list[Twin]:
    """The finished trials that `trial` could turn out to be: measured (ok), the same engine, model
    (by what it is, not where its files sit: a sweep resumed on another machine), weights and GPUs, every profile of `trial` among theirs, and a start log that stated its limits."""
    out, seen = [], set()
    for r in finished:
        t = r.trial
        if (r.status != Status.ok or t.id == trial.id or t.id in seen or t.engine != trial.engine
                or model_identity(t.model) != model_identity(trial.model) or t.weights != trial.weights or t.gpus != trial.gpus
                or not set(trial.profiles) <= set(t.profiles)):
            continue
        reported = {k: r.engine_reported[k] for k in SERVER_KEYS if r.engine_reported.get(k) is not None}
        if not reported:
            continue
        seen.add(t.id)
        out.append(Twin(trial_id=t.id, label=t.label, flags=dict(t.all_flags), gpu_name=r.gpu_name,
                        reported=reported))
    return out


def _knob_flags(engine: str, knob: str, values: Sequence[Any]) -> set[str]:
    """The flags a knob renders to, for any of `values` (a knob set by its flag directly counts too)."""
    renderer = get_engine(engine).knob_renderers.get(knob)
    out = set()
    for v in values:
        try:
            out |= set(renderer(v, {})) if renderer else set()
        except (ValueError, TypeError):
            continue
    return out


def same_server(trial: Trial, reported: Mapping[str, Any], twins: Sequence[Twin], *,
                gpu_name: str | None = None) -> SameServer | None:
    """The measured trial whose server this one's engine turned out to run, and the reason to record;
    None when the engine overrode no knob, or no candidate matches on every flag and every limit."""
    limits = effective_limits(trial.engine, trial.knobs or {}, trial.all_flags, reported)
    if limits is None or not limits.knob_overridden:
        return None
    apart = set()
    for o in limits.knob_overridden:
        apart |= _knob_flags(trial.engine, o.knob, [o.asked, o.got])

    def rest(flags: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in flags.items() if k not in apart}

    mine = {k: reported[k] for k in SERVER_KEYS if reported.get(k) is not None}
    for twin in twins:
        if rest(twin.flags) != rest(trial.all_flags):
            continue
        if gpu_name and twin.gpu_name and gpu_name != twin.gpu_name:
            continue
        # every limit either log states, stated by both and equal (the overridden knob's is among
        # them: the override was read from this log)
        if mine != twin.reported:
            continue
        stated = ", ".join(f"{SERVER_KEYS[k]} {value_text(mine[k])}" for k in SERVER_KEYS if k in mine)
        return SameServer(twin, f"the engine ran the same server as {twin.label}: {overrides_text(limits)}; every other flag "
                      f"is that trial's, and its log's limits equal that trial's ({stated}). Not measured twice: "
                      f"{twin.label}'s runs are this configuration's")
    return None
