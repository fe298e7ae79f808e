"""farm's numbers beside a reference study's (the seed document's), trial by trial, profile by profile.

A study may name a reference results file (`reference:`): the trials of both that share a name
(the seed's steps) are set side by side on each profile, with the reference's figure as it
reported it and as its own totals give it (the seed's reported rate is a windowed mean that runs
up to 62 % above tokens / duration), and farm's mean over its runs. Pure: no engine, no store.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from farm.analysis.records import Results, RunRecord


class ReferenceRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trial: str = Field(description="Trial name, the same in both.")
    profile: str = Field(description="farm's profile.")
    reference_profile: str = Field(description="The reference's profile it is set against.")
    reference_reported_tps: float | None = Field(description="Total tok/s as the reference reported it.")
    reference_totals_tps: float | None = Field(description="(input + output tokens) / duration of the reference's run.")
    farm_tps: float | None = Field(description="farm's mean total tok/s over its ok runs (tokens / duration).")
    farm_runs: int = Field(description="farm's ok runs of this trial and profile.")
    ratio_to_totals: float | None = Field(description="farm / reference from its totals.")


class ReferenceComparison(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str
    source: str
    rows: list[ReferenceRow]
    note: str | None = None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _named_trials(results: Results) -> dict[str, str]:
    """Trial name -> trial id (a results file names a trial after its first run)."""
    out: dict[str, str] = {}
    for rec in results.records:
        if rec.name:
            out.setdefault(rec.name, rec.trial)
    return out


def compare_with_reference(results: Results, reference: Results, *, label: str,
                           profiles: dict[str, str] | None = None, note: str | None = None) -> ReferenceComparison:
    """Rows for every (trial name, profile) that both measured; `profiles` maps farm's profile
    names to the reference's where they differ (a synthetic stand-in for a dataset file)."""
    mapping = dict(profiles or {})
    ours, theirs = _named_trials(results), _named_trials(reference)
    rows: list[ReferenceRow] = []
    for name, trial in ours.items():
        ref_trial = theirs.get(name)
        if ref_trial is None:
            continue
        for profile in results.profiles:
            ref_profile = mapping.get(profile, profile)
            ref_runs = [r for r in reference.records if r.trial == ref_trial and r.profile == ref_profile
                        and r.measured]
            runs = [r for r in results.records if r.trial == trial and r.profile == profile]
            if not ref_runs or not runs:
                continue
            ok: list[RunRecord] = [r for r in runs if r.measured]
            farm_tps = _mean([r.metrics["total_tps"] for r in ok])
            totals = _mean([v for r in ref_runs if (v := r.tps_from_totals) is not None])
            rows.append(ReferenceRow(
                trial=name, profile=profile, reference_profile=ref_profile,
                reference_reported_tps=_mean([r.metrics["total_tps"] for r in ref_runs]),
                reference_totals_tps=totals, farm_tps=farm_tps, farm_runs=len(ok),
                ratio_to_totals=farm_tps / totals if farm_tps is not None and totals else None,
            ))
    return ReferenceComparison(label=label, source=reference.source, rows=rows, note=note)
