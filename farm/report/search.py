"""The report's sections of a search: a local search's answer (the start against farm's pick, the
path the search took), a halving sweep's rungs (what each rung spent, why each trial stopped), and
the memory-fit predictor's error (farm/analysis/local_search.py, farm/analysis/halving.py,
farm/analysis/memory_fit.py).

A report of one sweep shows its lines as the sweep printed them; a report of several (`farm
report A B`) gives each sweep that has them its own subsection, named by its sweep id, since
each halving sweep spent its own budget and stopped its own trials."""

from __future__ import annotations

from typing import Any

from farm.analysis.halving import summary_lines
from farm.analysis.local_search import path_lines
from farm.analysis.memory_fit import check_lines
from farm.report.doc import Doc
from farm.report.models import HalvingNote, LocalSearchNote, MemoryFitNote, Report


def halving_lines(note: HalvingNote) -> list[str]:
    return summary_lines(note.plan, note.labels)


def memory_fit_lines(note: MemoryFitNote) -> list[str]:
    lines = check_lines(note.checks)
    if lines and note.accelerator:  # a fit is per GPU model: say whose memory was predicted
        lines[0] += f" (predicted for the memory of one {note.accelerator})"
    return lines


def local_search_lines(note: LocalSearchNote) -> list[str]:
    """The answer first (the user's command against farm's pick, profile by profile), then the path."""
    p, name = note.plan, (lambda t: note.labels.get(t, t))
    path = path_lines(p, note.labels)
    # where the user's command could not start here, the search's start is farm's repair of it
    yours = "Your command" if p.given_start is None else "farm's repair of your command"
    if not p.done:
        import re

        reason = re.sub(r"\b[a-z0-9_]+-[0-9a-f]{8}\b", lambda m: name(m.group(0)), p.reason)
        return [f"Search in progress: no answer yet ({reason}); `farm sweep --resume SWEEP_ID` continues it", *path]
    if p.stop == "start_fails":
        return [f"Your command ({name(p.start)}) does not start here, and the study asks for no repair: no answer",
                *path]
    if p.incumbent == p.start:
        near = [f"  {name(j.neighbour.trial)}: {j.relative_pct:+.1f} % [{j.ci_low_pct:+.1f}, {j.ci_high_pct:+.1f}]"
                for s in p.steps[-1:] for j in s.judged if j.relative_pct is not None and j.ci_low_pct is not None]
        head = (f"{yours} ({name(p.start)}) is the answer: no neighbour was significantly better"
                if p.stop == "converged" else f"{yours} ({name(p.start)}) stands: {p.reason}")
        return [head + (" (its nearest neighbours, last step):" if near else "."), *near, *path]
    if not note.final:
        return [f"farm's pick so far: {name(p.incumbent)} (the final comparison against {yours.lower()} "
                f"{name(p.start)} is not measured yet)", *path]
    rows = []
    for d in note.final:
        if d.capacity_search:
            rows.append(f"  {d.profile}: a capacity search (runs at several loads): compared by the most load each "
                        f"holds under the profile's SLO, in its capacity table, not by a mean throughput")
            continue
        if d.ci_low_pct is None:
            rows.append(f"  {d.profile}: {name(p.incumbent)} {'n/a' if d.relative_pct is None else f'{d.relative_pct:+.2f} %'} "
                        f"against your command ({d.pick_runs} vs {d.start_runs} runs: no interval)")
            continue
        mark = "significant" if d.significant else "not significant"
        rows.append(f"  {d.profile}: {d.relative_pct:+.2f} % [{d.ci_low_pct:+.2f}, {d.ci_high_pct:+.2f}], Holm p = "
                    f"{d.p_holm:.3g}, {mark} ({d.pick_mean:,.1f} vs {d.start_mean:,.1f} total tok/s, "
                    f"{d.pick_runs} vs {d.start_runs} runs)")
    return [f"{yours} ({name(p.start)}) against farm's pick ({name(p.incumbent)}), on every profile "
            f"(95 % intervals, Holm over {sum(not d.capacity_search for d in note.final)} profiles):", *rows, *path]


def _sections(report: Report) -> list[tuple[str, list[tuple[str | None, list[str]]]]]:
    return [("Your command vs farm's (local search)", [(n.sweep_id, local_search_lines(n)) for n in report.local_search]),
            ("Halving", [(n.sweep_id, halving_lines(n)) for n in report.halving]),
            ("Memory fit", [(n.sweep_id, memory_fit_lines(n)) for n in report.memory_fit])]


def search_sections(doc: Doc, report: Report) -> None:
    for title, notes in _sections(report):
        notes = [(sweep, lines) for sweep, lines in notes if lines]
        if not notes:
            continue
        doc.h(title)
        for sweep, lines in notes:
            if sweep is not None:
                doc.h3(f"Sweep {doc.tick(sweep)}")
            doc.p(lines[0])
            if len(lines) > 1:
                doc.p("\n".join(("- " if doc.md else "") + line.strip() for line in lines[1:]))


def search_json(report: Report) -> dict[str, Any]:
    """The sections' keys of the report's JSON, only where the report has them (a grid sweep's
    JSON is what it was before halving existed)."""
    out: dict[str, Any] = {}
    halving = [{"sweep_id": n.sweep_id, **n.plan.model_dump(mode="json"), "lines": halving_lines(n)}
               for n in report.halving]
    for h, n in zip(halving, report.halving):
        for stop in h["stops"]:
            stop["label"] = n.labels.get(stop["trial"], stop["trial"])
    if halving:
        out["halving"] = halving
    fits = [{"sweep_id": n.sweep_id, **({"accelerator": n.accelerator} if n.accelerator else {}),
             "trials": [{**c.model_dump(), "error_pct": None if c.error is None else c.error * 100}
                        for c in n.checks], "lines": memory_fit_lines(n)}
            for n in report.memory_fit if memory_fit_lines(n)]
    if fits:
        out["memory_fit"] = fits
    searches = [{"sweep_id": n.sweep_id, **n.plan.model_dump(mode="json"),
                 "final_comparison": [d.model_dump() for d in n.final], "labels": n.labels,
                 "lines": local_search_lines(n)} for n in report.local_search]
    if searches:
        out["local_search"] = searches
    return out
