"""The report's engine-against-engine section: every profile, at defaults and at each engine's best.

Beside each lead: its interval where both sides ran more than once, the limits the two ran under
when they clearly differ, and how many trials of each engine were measured, since an engine's
"best" is only the best of what ran.
"""

from __future__ import annotations

from farm.report.checks import interval_text
from farm.report.doc import Doc
from farm.report.models import Report


def engine_matchups_section(doc: Doc, report: Report) -> None:
    sel = report.selection
    if not sel.engine_matchups:
        return
    doc.h("Engines profile by profile: at defaults and at each one's best")
    conf = f"{(1 - sel.alpha) * 100:g} %"
    doc.table(["Profile", "At", "Leader (trial)", "Total TPS", "Runner-up (trial)", "Total TPS",
               f"Lead, {conf} interval, Holm p", "Ran under clearly different limits"],
              [[m.profile, m.at, f"{m.leader} ({m.leader_trial})", f"{m.leader_tps:,.2f}",
                f"{m.runner_up} ({m.runner_up_trial})", f"{m.runner_up_tps:,.2f}", interval_text(m.diff),
                "; ".join(m.limits_apart) or "no"] for m in sel.engine_matchups])
    measured: dict[str, set[str]] = {}
    for t in sel.trials:
        if t.total_tps is not None and t.node_control_of is None:
            measured.setdefault(t.engine, set()).add(t.id)
    counts = ", ".join(f"{engine} {len(ids)}" for engine, ids in measured.items())
    doc.p(f"Trials measured per engine: {counts}. An engine's best is the best of its trials that ran; "
          "a lead under clearly different limits may say more about a setting than about the engine.")
