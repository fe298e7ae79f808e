"""One command across workloads (issue 7 point 5): each trial's worst relative shortfall over the profiles."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from pydantic import Field

from farm.analysis.stats.summary import _Model


class ProfileCost(_Model):
    """One trial on one profile, against the baseline and against that profile's winner."""

    profile: str = Field(description="Profile name.")
    mean: float = Field(description="The trial's mean throughput on this profile.")
    relative_to_baseline: float = Field(description="mean / baseline mean - 1.")
    profile_winner: str = Field(description="The best trial on this profile.")
    cost_vs_profile_winner: float = Field(
        description="mean / profile winner's mean - 1 (<= 0 when the winner is the best mean): what choosing "
        "this trial for every workload costs here."
    )


class CrossProfileEntry(_Model):
    """One trial's standing over all profiles."""

    trial: str = Field(description="Trial id.")
    comparable: bool = Field(description="False when the trial lacks a result on some profile.")
    missing_profiles: list[str] = Field(default_factory=list, description="Profiles with no result for this trial.")
    worst_case_relative: float | None = Field(
        description="Minimum over profiles of mean / baseline mean - 1; None when not comparable."
    )
    worst_profile: str | None = Field(description="The profile where that minimum occurs; None when not comparable.")
    geomean_relative: float | None = Field(
        description="Geometric mean over profiles of mean / baseline mean, minus 1; None when not comparable."
    )
    per_profile: list[ProfileCost] = Field(description="Per-profile figures (only the profiles it has).")


class CrossProfileRanking(_Model):
    """Trials ranked by worst-case throughput relative to the baseline across profiles."""

    baseline: str = Field(description="The baseline trial.")
    profiles: list[str] = Field(description="Profiles the ranking is over (those where the baseline has a result).")
    profiles_without_baseline: list[str] = Field(
        default_factory=list, description="Profiles left out because the baseline has no usable result there."
    )
    profile_winners: dict[str, str] = Field(description="The winner used for each profile's cost figure.")
    recommended: str | None = Field(description="Best worst-case among comparable trials; None if none is.")
    entries: list[CrossProfileEntry] = Field(
        description="Comparable trials by worst case then geometric mean (both descending), then the rest by name."
    )


def worst_case_relative(
    per_profile: Mapping[str, Mapping[str, float]],
    baseline: str,
    *,
    profile_winners: Mapping[str, str] | None = None,
) -> CrossProfileRanking:
    """Rank trials by their worst-case throughput relative to the baseline over all profiles.

    ``per_profile[profile][trial]`` is a mean (higher is better). A trial without a finite
    result on some profile is reported as not comparable, never filled in. A profile where the
    baseline has no positive finite mean cannot give relative figures and is left out, and
    listed. ``profile_winners`` (e.g. each profile's ``Verdict.recommended``) overrides the
    default per-profile winner, the best mean.
    """
    def ok(v: float | None) -> bool:
        return v is not None and math.isfinite(v)

    profiles = [p for p in per_profile if ok(per_profile[p].get(baseline)) and per_profile[p][baseline] > 0]
    skipped = [p for p in per_profile if p not in profiles]
    if not profiles:
        raise ValueError(f"baseline {baseline!r} has no usable result on any profile")
    winners: dict[str, str] = {}
    for p in profiles:
        have = {t: v for t, v in per_profile[p].items() if ok(v)}
        if profile_winners and p in profile_winners:
            if profile_winners[p] not in have:
                raise ValueError(f"profile winner {profile_winners[p]!r} has no result on profile {p!r}")
            winners[p] = profile_winners[p]
        else:
            winners[p] = max(sorted(have), key=lambda t: have[t])

    trials = sorted({t for p in per_profile for t in per_profile[p]})
    entries = []
    for t in trials:
        costs = []
        missing = []
        for p in profiles:
            v = per_profile[p].get(t)
            if not ok(v):
                missing.append(p)
                continue
            b, w = per_profile[p][baseline], per_profile[p][winners[p]]
            costs.append(ProfileCost(profile=p, mean=float(v), relative_to_baseline=v / b - 1,
                                     profile_winner=winners[p], cost_vs_profile_winner=v / w - 1))
        comparable = not missing
        if comparable:
            worst = min(costs, key=lambda c: c.relative_to_baseline)
            ratios = np.array([c.mean / per_profile[c.profile][baseline] for c in costs])
            geo = float(np.exp(np.mean(np.log(ratios)))) - 1 if np.all(ratios > 0) else None
            entries.append(CrossProfileEntry(trial=t, comparable=True, worst_case_relative=worst.relative_to_baseline,
                                             worst_profile=worst.profile, geomean_relative=geo, per_profile=costs))
        else:
            entries.append(CrossProfileEntry(trial=t, comparable=False, missing_profiles=missing,
                                             worst_case_relative=None, worst_profile=None, geomean_relative=None,
                                             per_profile=costs))
    good = sorted((e for e in entries if e.comparable),
                  key=lambda e: (-e.worst_case_relative, -(e.geomean_relative if e.geomean_relative is not None
                                                          else -math.inf), e.trial))
    rest = [e for e in entries if not e.comparable]
    return CrossProfileRanking(baseline=baseline, profiles=profiles, profiles_without_baseline=skipped,
                               profile_winners=winners, recommended=good[0].trial if good else None,
                               entries=good + rest)
