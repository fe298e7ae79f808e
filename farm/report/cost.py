"""The report's "GPU time" section: where the sweep's GPU time went, by phase (by trial: the appendix's)."""

from __future__ import annotations

import statistics

from farm.analysis.gpu_time import PHASES, PhaseSeconds
from farm.analysis.start_phases import PHASE_WORDS
from farm.report.doc import Doc
from farm.report.layout import appendix_ref
from farm.report.models import Report

PHASE_LABELS = {"starting": "starting engines", "warming_up": "warm-up runs", "measuring": "measured runs",
                "failing": "failed runs and trials", "other": "farm's own (stop, probes, logging)"}


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.3f}"


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole > 0 else "-"


def gpu_models(report: Report) -> list[str]:
    """The GPU models the report's runs ran on, as the driver names them ('NVIDIA H200')."""
    return sorted({r.provenance.gpu for r in report.results.records if r.provenance is not None and r.provenance.gpu})


def gpu_time_section(doc: Doc, report: Report) -> None:
    cost = report.gpu_time
    if cost is None:
        return
    doc.h("GPU time")
    with_gpus = cost.gpu_seconds.total > 0
    total: PhaseSeconds = cost.gpu_seconds if with_gpus else cost.trial_seconds
    unit = "GPU-hours" if with_gpus else "trial-hours (these trials held no GPU)"
    # GPU-hours are per GPU model: the one (or ones) the runs recorded
    models = gpu_models(report) if with_gpus else []
    on = f" of {', '.join(models)}" if models else ""
    doc.p(f"{_hours(total.total)} {unit}{on} over {len(cost.trials)} trial(s), from each trial's start in its actor to "
          f"its end; measuring was {_share(total.measuring, total.total)} of it.")
    doc.table(["Phase", unit.split(" ")[0], "Share"],
              [[PHASE_LABELS[p], _hours(getattr(total, p)), _share(getattr(total, p), total.total)] for p in PHASES])
    if cost.trials:
        doc.p(f"Each trial's: {appendix_ref(doc, 'GPU time by trial')}.")
    if cost.start_phases:
        whole = sum(cost.start_phases.values())
        doc.p("Starting engines, by phase (seconds summed over the trials' starts, from the engines' own logs):")
        doc.table(["Phase", "Seconds", "Share"],
                  [[PHASE_WORDS.get(p, p), f"{cost.start_phases[p]:.0f}", _share(cost.start_phases[p], whole)]
                   for p in PHASE_WORDS if p in cost.start_phases])
    if cost.starts:
        parts = [f"{len(v)} {k} (median {statistics.median(v):.0f} s)" for k, v in sorted(cost.starts.items())]
        line = "Starts: " + ", ".join(parts)
        if "cold" in cost.starts and "warm" in cost.starts:
            line += (f"; a warm start took {statistics.median(cost.starts['warm']) / statistics.median(cost.starts['cold']):.2f}"
                     " of a cold one")
        doc.p(line + ".")


def gpu_time_by_trial(doc: Doc, report: Report) -> None:
    """Each trial's GPU time by phase (the appendix)."""
    cost = report.gpu_time
    if cost is None or not cost.trials:
        return
    doc.h("GPU time by trial")
    doc.table(["Trial", "GPUs", "Wall (s)", *[PHASE_LABELS[p].split(" ")[0] + " (s)" for p in PHASES]],
              [[t.label, str(t.gpus), f"{t.seconds.total:.0f}", *[f"{getattr(t.seconds, p):.0f}" for p in PHASES]]
               for t in cost.trials])
