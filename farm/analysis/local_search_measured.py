"""What a step of the guarded local search measured, and how it is judged (pure): each trial's runs
of a step, pooled or by machine, and each raced neighbour against the incumbent
(farm/analysis/local_search.py's module docstring says how the search moves on them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from farm.analysis.halving import Rung
from farm.analysis.local_search_models import Judged, Neighbour, Step
from farm.analysis.outcome import FINISHED
from farm.analysis.results import Status, TrialResult
from farm.analysis.stats import relative_difference
from farm.analysis.stats.blocks import UNKNOWN, blocked_difference
from farm.analysis.stats.verdict import DEFAULT_MARGIN, decide, holm


def samples_of(results: Sequence[TrialResult], rung: Rung, min_success_rate: float = 0.0) -> dict[str, list[float]]:
    """Trial id -> the total tok/s of its runs of `rung` (its primary, its pass)."""
    return pooled(blocks_of(results, rung, min_success_rate))



def pooled(blocks: Mapping[str, Mapping[str, list[float]]]) -> dict[str, list[float]]:
    """Each trial's runs of every machine together (what a step's counts and means show)."""
    return {t: [v for vs in by_machine.values() for v in vs] for t, by_machine in blocks.items()}



def blocks_of(results: Sequence[TrialResult], rung: Rung, min_success_rate: float = 0.0) -> dict[str, dict[str, list[float]]]:
    """Trial id -> machine key -> the total tok/s of its runs of `rung` there (`UNKNOWN` for runs that
    recorded no machine): a step resumed on another lent machine is two machines' runs. A control's
    runs (`node_control_of`: the incumbent raced again where the step resumed) are its trial's."""
    out: dict[str, dict[str, list[float]]] = {}
    for res in results:
        for run in res.runs:
            if run.pass_index != rung.index or run.profile != rung.primary:
                continue
            m = run.metrics
            if run.status == Status.ok and m is not None and m.total_tps is not None and \
                    (m.success_rate is None or m.success_rate >= min_success_rate):
                # a control of a trial (the incumbent raced again where a step resumed) is that trial
                who = res.trial.node_control_of or res.trial.id
                out.setdefault(who, {}).setdefault(run.machine or UNKNOWN, []).append(float(m.total_tps))
    return out



def _judge(step: Step, nbrs: Mapping[str, Neighbour], samples: Mapping[str, list[float]],
           margin: float = DEFAULT_MARGIN, blocks: Mapping[str, Mapping[str, list[float]]] | None = None,
           ended: Mapping[str, str] | None = None) -> list[Judged]:
    """Each raced neighbour against the incumbent. `blocks` (trial -> machine -> runs): the runs by
    machine, so that a step whose trials ran on different machines (a resume on another lent GPU)
    compares within a machine, never pooling the machines' runs (farm/analysis/stats/blocks.py).
    `ended` (trial -> status and cause): neighbours whose failure is final (the engine refused the
    configuration, e.g.): they are not run again, so no number of runs would make them better."""
    base = samples.get(step.incumbent, [])
    rows, tests = [], []
    for tid in step.race[1:]:
        n = nbrs[tid]
        mine = samples.get(tid, [])
        if not mine and tid in (ended or {}):
            rows.append(Judged(neighbour=n, runs=0, decision="failed", settled=True,
                               why=f"measured nothing ({ended[tid]}): not run again, so not a candidate"))
            continue
        if len(mine) < 2 or len(base) < 2:
            rows.append(Judged(neighbour=n, runs=len(mine), why="no usable runs" if not mine else
                               f"{len(mine)} run(s) against the incumbent's {len(base)}: no test"))
            continue
        if blocks is not None and tid in blocks and step.incumbent in blocks:
            d = blocked_difference(blocks[tid], blocks[step.incumbent], confidence=1 - step.alpha)
        else:
            d = relative_difference(mine, base, method="log", confidence=1 - step.alpha)
        if d.machines == "no_shared_control":
            rows.append(Judged(neighbour=n, runs=len(mine), relative_pct=None if d.relative is None else d.relative * 100,
                               decision="undecided",
                               why=f"cannot be told from the incumbent: {d.machines_note}; the incumbent run again "
                                   "on its machine would tell"))
            continue
        rows.append(Judged(neighbour=n, runs=len(mine), relative_pct=None if d.relative is None else d.relative * 100,
                           ci_low_pct=None if d.ci_low is None else d.ci_low * 100,
                           ci_high_pct=None if d.ci_high is None else d.ci_high * 100, why=""))
        tests.append((len(rows) - 1, d))
    adjusted = holm([d.p_value if d.p_value is not None else 1.0 for _, d in tests]) if tests else []
    for (i, d), p in zip(tests, adjusted):
        row = rows[i]
        dec = decide(d, p_adjusted=p, alpha=step.alpha, margin=margin, family=len(tests))
        better = dec.decision == "better" and (d.relative or 0) >= margin
        settled = dec.eq_high is not None and dec.eq_high < margin
        m = f"{margin * 100:g} %"
        if better:
            why = f"significantly better by at least {m} (Holm p = {p:.3g} < {step.alpha:.3g})"
        elif settled and dec.decision == "equivalent":
            why = f"equivalent within \u00b1{m} (its {(1 - 2 * step.alpha) * 100:g} % interval inside the margin)"
        elif settled and dec.decision == "worse":
            why = f"slower ({(d.relative or 0) * 100:+.1f} %, Holm p = {p:.3g})"
        elif settled:
            why = f"not better by {m} or more (its {(1 - 2 * step.alpha) * 100:g} % interval ends at " \
                  f"{(dec.eq_high or 0) * 100:+.1f} %)"
        elif dec.decision == "better":
            why = f"significantly better but by less than {m} (Holm p = {p:.3g}); whether by {m} is open"
        else:
            more = "" if dec.more_runs is None else f": {dec.more_runs} more run(s) each would decide it"
            why = f"cannot tell yet whether it is better by {m} (Holm p = {p:.3g}){more}"
        rows[i] = row.model_copy(update={"p_holm": p, "better": better, "decision": dec.decision, "settled": settled,
                                         "more_runs": None if better or settled else dec.more_runs, "why": why})
    return rows



def _ended_without_runs(results: Sequence[TrialResult], race: Sequence[str]) -> dict[str, str]:
    """Raced trials whose last attempt failed for good (a status resume does not run again), with the
    status and its cause."""
    last = {r.trial.id: r for r in results if r.trial.id in race}
    return {t: f"{r.status.value}: {r.reason}" if r.reason else r.status.value
            for t, r in last.items() if r.status != Status.ok and r.status in FINISHED}
