"""Ranking trials by capacity under a profile's SLO (capacity profiles, `kind: capacity`).

Each trial's capacity comes from its search's runs (farm/analysis/capacity.py): the highest load
that met the SLO, in the interval up to the lowest load that broke it. The rules follow farm's
own for throughput: a leader is a *winner* only when the runs separate it from the runner-up (the
runner-up broke the SLO at a load the leader met: their intervals do not overlap); otherwise the
trials whose intervals overlap the leader's are *tied* and the simplest of them (fewest
non-default flags) is recommended. No trial meeting the SLO at the lowest load is an answer too:
`SLONotMet`, one line naming the closest trial and how far it misses each limit.
"""

from __future__ import annotations

from farm.analysis import capacity as cap
from farm.analysis.records import Results, RunRecord
from farm.analysis.results import Status
from farm.analysis.selection.capacity_models import CapacityPoint, CapacityRanking, CapacityRow
from farm.analysis.selection.comparisons import complexity_of
from farm.analysis.selection.models import ProfileVerdict, SelectionSettings
from farm.errors import SLONotMet

UNIT = {"concurrency": "concurrent requests", "rate": "req/s"}

__all__ = ["CapacityPoint", "CapacityRanking", "CapacityRow", "rank", "rankings"]



def capacity_profiles(results: Results) -> list[str]:
    return [p for p in results.profiles_with_runs() if results.profiles[p].capacity is not None]


def _floor(settings: SelectionSettings, profile: str) -> float:
    slo = settings.slo.get(profile)
    return slo.min_success_rate if slo and slo.min_success_rate is not None else settings.min_success_rate


def _points(records: list[RunRecord], slo, floor: float) -> list[cap.Point]:
    return [cap.point(r.load, r.metrics, r.status == Status.ok, slo, floor) for r in records if r.load is not None]


def _row(trial: str, records: list[RunRecord], spec, slo, floor: float, complexity: int) -> CapacityRow:
    points = _points(records, slo, floor)
    v = cap.verdict(spec, points)
    lowest = v.lowest.misses if v.capacity is None and v.lowest else ()
    return CapacityRow(
        trial=trial, label=records[0].label, capacity=v.capacity, high=v.high, interval=v.interval_text, stop=v.stop,
        why_stopped=cap.STOP_WORDS[v.stop], total_tps=v.at.total_tps if v.at else None,
        request_rate=v.at.request_rate if v.at else None, goodput_rps=v.at.goodput_rps if v.at else None,
        runs=len(points), complexity=complexity,
        curve=[_curve_point(p) for p in v.curve],
        worst_miss=max((m.relative for m in lowest), default=None) if lowest else None,
        misses_at_lowest=[m.text() for m in lowest])


def _curve_point(p: cap.Point) -> CapacityPoint:
    # The search's point as the report shows it: the same numbers, its misses as text.
    numbers = {name: getattr(p, name) for name in CapacityPoint.model_fields if name != "misses"}
    return CapacityPoint(**numbers, misses=[m.text() for m in p.misses])


def _load(x: float) -> str:
    return f"{x:g}"


def rank(results: Results, settings: SelectionSettings, profile: str) -> CapacityRanking:
    """The capacity ranking of one capacity profile."""
    spec = results.profiles[profile].capacity
    slo = settings.slo[profile]
    floor = _floor(settings, profile)
    by_trial: dict[str, list[RunRecord]] = {}
    for r in results.records:
        if r.profile == profile and r.node_control_of is None:
            by_trial.setdefault(r.trial, []).append(r)
    rows = [_row(t, recs, spec, slo, floor, complexity_of(recs[0], settings)) for t, recs in by_trial.items()]
    rows.sort(key=lambda r: (r.capacity is None, -(r.capacity or 0), -(r.total_tps or 0),
                             r.worst_miss if r.worst_miss is not None else float("inf")))
    unit = UNIT[spec.over]
    limits = dict(ttft_p95_ms_max=slo.ttft_p95_ms_max, tpot_mean_ms_max=slo.tpot_mean_ms_max, min_success_rate=floor)
    found = [r for r in rows if r.capacity is not None]
    if not found:
        return CapacityRanking(profile=profile, over=spec.over, unit=unit, rows=rows, decision="none", recommended=None,
                               leader=None, reason=_no_capacity_line(profile, spec, rows, unit), **limits)
    lead = found[0]
    # Overlapping intervals: the runs do not show which of the two serves more.
    tied = [r for r in found if r is lead or r.high is None or r.high > lead.capacity]
    if len(found) == 1:
        decision, pick = "only_candidate", lead
        reason = f"{lead.label} is the only trial that meets the SLO: {_load(lead.capacity)} {unit} {lead.interval}"
    elif len(tied) == 1:
        decision, pick = "winner", lead
        second = found[1]
        reason = (f"{lead.label} serves {_load(lead.capacity)} {unit} {lead.interval} under the SLO; the runner-up "
                  f"{second.label} broke it at {_load(second.high)}, a load {lead.label} met")
    else:
        decision = "tie"
        pick = min(tied, key=lambda r: (r.complexity, -(r.capacity or 0), -(r.total_tps or 0)))
        reason = (f"{', '.join(r.label for r in tied)}: their capacities' intervals overlap (the search cannot "
                  f"separate them); {pick.label}, with the fewest non-default flags ({pick.complexity}), is recommended")
    return CapacityRanking(profile=profile, over=spec.over, unit=unit, rows=rows, decision=decision,
                           recommended=pick.trial, leader=lead.trial, tied=[r.trial for r in tied], reason=reason,
                           **limits)


def _no_capacity_line(profile: str, spec, rows: list[CapacityRow], unit: str) -> str:
    closest = next((r for r in rows if r.misses_at_lowest), None)
    head = f"no trial meets the SLO of {profile} at its lowest load ({_load(spec.ladder[0])} {unit})"
    if closest is None:
        return head + ": no trial measured a load"
    return f"{head}; closest: {closest.label}, " + "; ".join(closest.misses_at_lowest)


def profile_verdict(ranking: CapacityRanking, settings: SelectionSettings) -> ProfileVerdict | None:
    """The ranking in the shape of a profile's verdict, for the report's and the summary's verdict lines."""
    if ranking.recommended is None:
        return None
    found = [r for r in ranking.rows if r.capacity is not None]
    # A capacity "tie" (the search's intervals overlap) is not a proven equivalence: it is undecided.
    decision = "undecided" if ranking.decision == "tie" else ranking.decision
    return ProfileVerdict(
        profile=ranking.profile, decision=decision, recommended=ranking.recommended,
        winner=ranking.leader if ranking.decision == "winner" else None, leader=ranking.leader,
        runner_up=found[1].trial if len(found) > 1 else None, baseline=None, alpha=settings.alpha,
        margin=settings.equivalence_margin, equivalent=[ranking.leader],
        comparisons=[], complexity={r.trial: r.complexity for r in found}, candidates=len(found),
        reason=ranking.reason)


def rankings(results: Results, settings: SelectionSettings) -> dict[str, CapacityRanking]:
    return {p: rank(results, settings, p) for p in capacity_profiles(results) if p in settings.slo}


def check_primary(found: dict[str, CapacityRanking], settings: SelectionSettings, source: str) -> None:
    """A capacity primary profile that no trial meets at its lowest load: the one-line answer."""
    ranking = found.get(settings.primary_profile)
    # Trials that measured no load at all (none started) are a failed sweep, not an SLO's answer.
    if ranking is not None and ranking.recommended is None and any(r.curve for r in ranking.rows):
        raise SLONotMet(ranking.reason, file=source)


def at_capacity(results: Results, found: dict[str, CapacityRanking]) -> Results:
    """`results` with each capacity profile reduced to one run per trial: the one at its capacity
    (or, without one, at its lowest load), so the throughput tables show each trial where it counts."""
    keep: list[RunRecord] = []
    for r in results.records:
        ranking = found.get(r.profile)
        if ranking is None or r.load is None:
            keep.append(r)
            continue
        row = ranking.row(r.trial)
        target = row.capacity if row and row.capacity is not None else (row.curve[0].load if row and row.curve else None)
        if target is not None and r.load == target and not any(k.trial == r.trial and k.profile == r.profile for k in keep):
            keep.append(r)
    return results.model_copy(update={"records": keep})
