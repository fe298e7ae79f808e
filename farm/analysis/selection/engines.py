"""Engine against engine on every profile, at defaults and at each engine's best.

The seed's first finding compared the engines at their defaults on one profile; a default can
hold one engine back (SGLang runs a hybrid model 79-83 requests at once where vLLM runs 1024), so
each engine is also taken at its best measured configuration. Where both sides ran at least twice
the lead has an interval and a Holm-adjusted test over the whole family of matchups; single runs
give the lead alone. The limits each side ran under stand beside it.
"""

from __future__ import annotations

from farm.analysis.limits import limits_apart
from farm.analysis.selection.comparisons import cell_diff_stat, holm_fill
from farm.analysis.selection.models import EngineMatchup, SelectionSettings
from farm.analysis.selection.rules import Cell, Table, _ordered, default_trial


def _pick(table: Table, engine: str, profile: str, at: str, settings: SelectionSettings) -> Cell | None:
    if at == "defaults":
        cell = table.get(default_trial(table, engine, settings), profile)
        return cell if cell is not None and cell.eligible and cell.score is not None else None
    cells = [c for c in table.on(profile) if table.first[c.trial].engine == engine and c.eligible
             and c.score is not None and c.control_of is None]
    return max(cells, key=lambda c: c.score, default=None)


def engine_matchups(table: Table, settings: SelectionSettings, profiles: list[str],
                    metric: str = "total_tps") -> list[EngineMatchup]:
    engines = _ordered(list(dict.fromkeys(r.engine for r in table.first.values())), settings.engine_order)
    if len(engines) < 2:
        return []
    out: list[EngineMatchup] = []
    for profile in profiles:
        for at in ("defaults", "best"):
            picked = [(e, c) for e in engines if (c := _pick(table, e, profile, at, settings)) is not None]
            if len(picked) < 2:
                continue
            picked.sort(key=lambda ec: -ec[1].score)
            (lead, a), (second, b) = picked[0], picked[1]
            ra, rb = table.first[a.trial], table.first[b.trial]
            out.append(EngineMatchup(
                profile=profile, at=at, leader=lead, runner_up=second,
                leader_trial=ra.name or a.trial, runner_up_trial=rb.name or b.trial,
                leader_tps=a.score, runner_up_tps=b.score,
                diff=cell_diff_stat(table, a, b, metric, settings.alpha, settings.equivalence_margin),
                limits_apart=limits_apart(ra.limits, rb.limits, names=(lead, second))))
    holm_fill([m.diff for m in out], settings.alpha)
    return out
