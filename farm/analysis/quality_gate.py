"""Which trials the quality gate checks, against which reference, and where each one stands.

A trial is **gated** when it changes what the model computes: a flag its engine declares a
numerics flag (`Engine.numerics_flags`: quantization, dtype, KV-cache dtype, speculative
decoding, ...) set away from the engine's default, or a model that is another variant of its
family (a pre-quantized checkpoint picked by the `quantization` knob). Its **reference** is,
in this order:

1. *grid*: the trial of the same grid that differs from it only in those knobs: the same engine,
   model family and weights, the same other flags, and no numerics change of its own;
2. *baseline*: the study's `baseline`, where it names a trial of the grid on the same engine and
   model family that changes no numerics;
3. *engine default* or *nearest*: the grid's trial of the same engine and model family, with no
   numerics change, that differs from it in the fewest other flags (the first in grid order of
   those): the engine's default (no flags beyond the engine's required ones, the study's default
   baseline taken per engine: a verdict across two engines would judge the engine, not the knob)
   where nothing is nearer. The flags it differs in are, by the engine's declaration, ones that
   move only speed; a grid whose every trial changes a knob beside the numerics ones (the
   default study's `full`) still finds a reference one flag away.

The reference is never itself a numerics change: a chain (FP8 KV cache against FP8 weights
against BF16) would let each step lose a margin's worth unseen. Flags every trial of an engine
gets (the study's `engines.<name>.flags`) are shared by the trial and its reference and gate
nothing.

A trial on dummy weights (`weights: dummy`, or the engine's dummy load format given by hand)
answers nothing worth checking: its status reads "quality not checked: dummy weights", whatever
verdict is handed in; it never reads as passed. Pure: the engine registry and the study only.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Mapping, Sequence

from pydantic import Field

from farm.analysis.quality import QualityVerdict
from farm.engines import get_engine
from farm.strict import Strict
from farm.study.spec import Study
from farm.study.trial import Trial

MODEL_VARIANT = "model"  # the key under which a model variant shows among a trial's numerics changes

DUMMY = "quality not checked: dummy weights"
NO_REFERENCE = "quality not checked: no reference"
NOT_YET = "quality not checked yet"
NOT_GATED = "not gated"

ReferenceFrom = Literal["grid", "baseline", "engine default", "nearest"]


class Reference(Strict):
    """A gated trial's reference and how it was found."""

    trial: str = Field(description="The reference trial's id.")
    name: str | None = None
    found: ReferenceFrom = Field(description="grid: the grid's trial without the numerics knobs; baseline: the "
                                 "study's baseline; engine default: the engine's trial with no flags of its own; "
                                 "nearest: the trial without numerics changes that differs in the fewest other flags.")
    differs_in: list[str] = Field(default_factory=list, description="Flags other than the numerics ones in which the "
                                  "reference differs (none for a grid twin).")


class QualityStatus(Strict):
    """Where one trial stands with the quality gate."""

    trial: str
    name: str | None = None
    gated: bool = Field(description="Whether the trial changes numerics (and so needs a verdict).")
    numerics: dict[str, Any] = Field(default_factory=dict, description=(
        "What changes numerics: its numerics flags away from the default, and `model` for a variant of the family."))
    reference: Reference | None = None
    dummy_weights: bool = False
    status: str = Field(description=f"'{NOT_GATED}', '{DUMMY}', '{NO_REFERENCE}', '{NOT_YET}', or the paired "
                        "verdict: worse, equivalent, better, cannot tell. Never 'passed'.")
    why: str = Field(description="One line: why this status.")
    verdict: QualityVerdict | None = None

    @property
    def refused(self) -> bool:
        """Significantly worse than its reference: never to be recommended."""
        return self.status == "worse"


def family(study: Study, model_key: str) -> str:
    """The model family's base key (a variant's `variant_of`, else the model itself)."""
    model = study.models.get(model_key)
    return (model.variant_of if model is not None and model.variant_of else None) or model_key


def numerics_changes(trial: Trial, study: Study) -> dict[str, Any]:
    """What in `trial` changes numerics: its engine's numerics flags set away from their default
    (of the trial's own flags: the engine's required flags are every trial's), and the model where
    it is a variant of its family with another quantization."""
    out = dict(get_engine(trial.engine).numerics(trial.flags))
    base = family(study, trial.model_key)
    if base != trial.model_key and base in study.models:
        ours, theirs = study.models[trial.model_key].quantization, study.models[base].quantization
        if ours != theirs:
            out[MODEL_VARIANT] = f"{trial.model_key} (quantization: {ours or 'none'})"
    return out


def on_dummy_weights(trial: Trial) -> bool:
    """Whether the trial's engine builds its model with random weights: `weights: dummy`, or the
    engine's dummy load format among its flags."""
    if trial.weights == "dummy":
        return True
    dummy = get_engine(trial.engine).dummy_weights_flags
    flags = trial.all_flags
    return bool(dummy) and all(flags.get(k) == v for k, v in dummy.items())


def _other_flags(trial: Trial) -> dict[str, Any]:
    """Its flags beside the numerics ones; a flag left unset (a grid axis's `null`) is not one of them."""
    numerics = get_engine(trial.engine).numerics(trial.flags)
    return {k: v for k, v in trial.flags.items() if k not in numerics and v is not None}


def _differs(a: Trial, b: Trial) -> list[str]:
    """The flags, numerics ones aside, that two trials set differently (one set, the other not, included)."""
    fa, fb = _other_flags(a), _other_flags(b)
    same = lambda x, y: json.dumps(x, sort_keys=True, default=str) == json.dumps(y, sort_keys=True, default=str)  # noqa: E731
    return sorted(k for k in {**fa, **fb} if k not in fa or k not in fb or not same(fa[k], fb[k]))


def find_reference(trial: Trial, trials: Sequence[Trial], study: Study) -> Reference | None:
    """The reference of a gated `trial` among `trials` (its grid's), in the module's order; None
    where the grid has no trial of its engine and model family without a numerics change."""
    pool = [t for t in trials if t.id != trial.id and t.node_control_of is None and t.engine == trial.engine
            and family(study, t.model_key) == family(study, trial.model_key) and t.weights == trial.weights
            and not numerics_changes(t, study)]
    if not pool:
        return None
    distance = {t.id: _differs(trial, t) for t in pool}
    twin = next((t for t in pool if not distance[t.id]), None)
    if twin is not None:
        return Reference(trial=twin.id, name=twin.name, found="grid")
    if study.baseline:
        base = next((t for t in pool if study.baseline in (t.id, t.name)), None)
        if base is not None:
            return Reference(trial=base.id, name=base.name, found="baseline", differs_in=distance[base.id])
    # Fewest flags apart; among equals the engine default, then the first in grid order (min keeps it).
    near = min(pool, key=lambda t: (len(distance[t.id]), bool(t.flags)))
    return Reference(trial=near.id, name=near.name, found="engine default" if not near.flags else "nearest",
                     differs_in=distance[near.id])


def _ref_shown(ref: Reference) -> str:
    apart = f"; it differs in {', '.join(ref.differs_in)} too" if ref.differs_in else ""
    return f"{ref.name or ref.trial} ({ref.found}{apart})"


def _shown(numerics: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v, default=str) if isinstance(v, (dict, list)) else v}"
                     for k, v in numerics.items())


def quality_statuses(trials: Sequence[Trial], study: Study,
                     verdicts: Mapping[str, QualityVerdict] | None = None) -> list[QualityStatus]:
    """Each trial's quality status (node controls left out: they repeat a trial), in grid order:
    gated or not, its reference, and its verdict (from `verdicts`, gated trial id -> verdict) or
    why it has none. A trial or reference on dummy weights is never checked."""
    verdicts = verdicts or {}
    by_id = {t.id: t for t in trials}
    out: list[QualityStatus] = []
    for trial in trials:
        if trial.node_control_of is not None:
            continue
        numerics = numerics_changes(trial, study)
        common = dict(trial=trial.id, name=trial.name, numerics=numerics)
        if not numerics:
            out.append(QualityStatus(**common, gated=False, status=NOT_GATED,
                                     why="not gated: it sets no knob that changes numerics"))
            continue
        ref = find_reference(trial, trials, study)
        dummy = on_dummy_weights(trial) or (ref is not None and on_dummy_weights(by_id[ref.trial]))
        changes = _shown(numerics)
        if dummy:
            out.append(QualityStatus(**common, gated=True, reference=ref, dummy_weights=True, status=DUMMY,
                                     why=f"{DUMMY}: random weights answer nothing, so the effect of {changes} on "
                                         f"answers is unknown"))
        elif ref is None:
            out.append(QualityStatus(**common, gated=True, status=NO_REFERENCE,
                                     why=f"{NO_REFERENCE}: it sets {changes}, and the grid has no trial of "
                                         f"{trial.engine} on {family(study, trial.model_key)} without them"))
        elif trial.id not in verdicts:
            out.append(QualityStatus(**common, gated=True, reference=ref, status=NOT_YET,
                                     why=f"{NOT_YET}: it sets {changes}; its reference is {_ref_shown(ref)}"))
        else:
            v = verdicts[trial.id]
            out.append(QualityStatus(**common, gated=True, reference=ref, status=v.verdict, verdict=v,
                                     why=f"{v.why}; against {_ref_shown(ref)}"))
    return out
