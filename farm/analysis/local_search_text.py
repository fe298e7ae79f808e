"""The guarded local search in words (pure): each judged neighbour, the search's path step by step,
and where it ended and why (the report's and the terminal's lines)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from farm.analysis.local_search_models import Judged, Neighbour, SearchPlan, start_failure_text


def _axis_text(n: Neighbour) -> str:
    def show(v: Any) -> str:
        if v is None:
            return "default"
        if isinstance(v, tuple):
            return "{" + ", ".join(f"{k}: {show(x)}" for k, x in v) + "}" if v and isinstance(v[0], tuple) else str(v)
        return str(v)

    axis = n.axis.removeprefix("knob:")
    if n.value == "combined":
        return f"{axis} combined"
    return f"{axis} {show(n.was)} -> {show(n.value)}"



def judged_text(j: Judged) -> str:
    if j.relative_pct is None:
        return f"{_axis_text(j.neighbour)}: {j.why}"
    ci = "" if j.ci_low_pct is None else f" [{j.ci_low_pct:+.1f}, {j.ci_high_pct:+.1f}]"
    return f"{_axis_text(j.neighbour)}: {j.relative_pct:+.1f} %{ci}, {j.why}"



def path_lines(p: SearchPlan, labels: Mapping[str, str] | None = None) -> list[str]:
    """The search's path, one line a step and one per neighbour, then where it ended and why."""
    labels = labels or {}
    name = lambda t: labels.get(t, t)  # noqa: E731
    budget = "no budget" if p.budget_gpu_hours is None else f"budget {p.budget_gpu_hours:g} GPU-hours"
    out = [f"local search from {name(p.start)} ({budget}, {p.spent_gpu_hours:.3f} GPU-hours spent: "
           + ", ".join(f"{k} {v:.3f}" for k, v in p.spent_by_phase.items()) + ")"]
    # The start's repair and those of the trials raced, each in full; the rest of the grid's, counted.
    raced = {t for s in p.steps for t in s.race}
    shown = sorted((r for r in p.repairs if r.trial == (p.given_start or p.start) or r.repaired in raced),
                   key=lambda r: r.trial != (p.given_start or p.start))  # the user's command first
    for r in shown:
        who = "your command" if r.trial == (p.given_start or p.start) else name(r.trial)
        out.append(f"  {who} {start_failure_text(r)}")
    if len(p.repairs) > len(shown):
        out.append(f"  {len(p.repairs) - len(shown)} other trial(s) of the grid cannot start here either; the search "
                   f"would race them repaired the same way")
    for s in p.steps:
        head = f"  step {s.index} (alpha {s.alpha:.3g}, Holm over {len(s.race) - 1}): {name(s.incumbent)} ({s.incumbent_runs} runs)"
        nothing = f", {len(s.measured_nothing)} measured nothing" if s.measured_nothing else ""
        pending = (f" -> under way: {len(s.so_far)} of {len(s.race)} trials measured{nothing}" if s.so_far
                   else " -> not measured yet")
        out.append(head + {"moved": f" -> moved to {name(s.moved_to or '')}", "converged": " -> stays: converged",
                           "failed": " -> failed", "pending": pending,
                           "undecided": " -> stays: undecided (more runs would tell)"}[s.outcome])
        out += [f"    {name(j.neighbour.trial)}: {judged_text(j)}" for j in s.judged]
        out += [f"    {name(t)}: {len(v)} run(s) so far, mean {sum(v) / len(v):,.0f} total tok/s" for t, v in s.so_far.items()]
        out += [f"    {name(t)}: measured nothing ({why})" for t, why in s.measured_nothing.items()]
        if s.unraced:
            out.append(f"    not raced (budget): {', '.join(name(t) for t in s.unraced)}")
    if (end := ending(p, labels)) is not None:
        out.append(f"  {end}")
    return out



def ending(p: SearchPlan, labels: Mapping[str, str] | None = None) -> str | None:
    """Where an ended search stopped, why, and what it answers (None while it runs): the path's last
    line, and the sweep's reason for no recommendation when it answers nothing."""
    if not p.done:
        return None
    labels = labels or {}
    name = lambda t: labels.get(t, t)  # noqa: E731
    ended = {"converged": "no neighbour is better by more than the margin", "budget": "the budget ran out",
             "undecided": "a neighbour could not be told from the incumbent",
             "failed": "a step measured nothing usable",
             "start_fails": "your command does not start here"}.get(p.stop or "", p.stop or "")
    if p.stop == "start_fails" or (p.stop == "failed" and len(p.steps) == 1 and p.incumbent == p.start):
        verdict = "no answer: the start measured nothing"
    elif p.stop == "undecided" and p.incumbent == p.start:
        verdict = ("no answer yet: the start stays until more runs tell" if p.given_start is None else
                   f"no answer yet: farm's repair of your command ({name(p.start)}) stays until more runs tell")
    elif p.incumbent == p.start:
        verdict = ("nothing beat the start: it is the answer" if p.given_start is None else
                   f"nothing beat farm's repair of your command ({name(p.start)}): it is the answer")
    else:
        verdict = f"farm's pick: {name(p.incumbent)}"
    return f"ended: {ended} ({p.reason}); {verdict}"
