"""`farm report SWEEP_ID`: a stored sweep's Halving, Local search and Memory fit sections, from what MLflow holds.

The sweep's own end-of-sweep report computes them from the results it just read back
(farm/run/sweep_report.py `_search_notes`); a report rebuilt later reads the same results, and
what only the sweep knew then (farm/store/searches.py reads it): the strategy and budget on its
run's tags (a `--resume` may have raised the budget), the driver's last plan (halving.json: which
trials the memory-fit model pruned where the models' config.json were, and a rung that measured
nothing; local_search.json and the price a local search first set on its steps), and each trial's
predicted KV-cache tokens (its child run's tags). Which of the recorded and the recomputed plans
is shown is decided by farm/analysis/halving.py `report_plan`.
"""

from __future__ import annotations

from dataclasses import dataclass

from farm.analysis import halving
from farm.analysis.results import TrialResult
from farm.report.models import HalvingNote, LocalSearchNote, MemoryFitNote
from farm.study.spec import Study
from farm.study.trial import Trial


@dataclass(frozen=True)
class StoredSearch:
    study: Study  # what the sweep's records are read with: a halving sweep's adds its rungs' profiles
    halving: HalvingNote | None
    memory_fit: MemoryFitNote | None
    local_search: LocalSearchNote | None = None


def read_search(uri: str, sweep_id: str, study: Study, grid: str | None, trials: list[Trial] | None,
                results: list[TrialResult], *, named: bool = False) -> StoredSearch:
    """The stored sweep's sections; `named`: the report covers several sweeps, so each section
    says which sweep it is."""
    from farm.run.memory import kv_checks, unfit_trials
    from farm.run.sweep_report import fit_accelerator
    from farm.store.searches import (recorded_halving_plan, recorded_kv_predictions, recorded_local_search_estimate,
                                     recorded_local_search_plan, stored_strategy)
    from farm.study.grid import expand

    label = sweep_id if named else None
    checks = kv_checks(study, results, recorded_kv_predictions(uri, sweep_id))
    fit = MemoryFitNote(sweep_id=label, checks=checks, accelerator=fit_accelerator(study, results)) if checks else None
    strategy = stored_strategy(uri, sweep_id)
    if grid and ((strategy and strategy[0] == "local") or study.strategy == "local") and study.start:
        from farm.analysis.local_search import step_rung
        from farm.run.local_search import rung_study
        from farm.run.sweep_report import local_search_note

        study = study.model_copy(update={"strategy": "local",
                                         "budget_gpu_hours": strategy[1] if strategy else study.budget_gpu_hours})
        primary = study.grid_primary_profile(grid)
        kept = recorded_local_search_plan(uri, sweep_id)
        note = local_search_note(study, grid, results, sweep_id=label, estimate=recorded_local_search_estimate(uri, sweep_id),
                                 kept=kept)
        return StoredSearch(rung_study(study, step_rung(1, primary, study.profiles[primary].requests)), None, fit,
                            note)
    if not grid or (strategy is None and study.strategy != "halving"):
        return StoredSearch(study, None, fit)
    # The run's budget tag is the one the sweep last ran with; the stored study has the first one.
    study = study.model_copy(update={"strategy": "halving",
                                     "budget_gpu_hours": strategy[1] if strategy else study.budget_gpu_hours})
    trials = trials or expand(study, grid)
    recorded = recorded_halving_plan(uri, sweep_id)
    pruned = halving.recorded_pruned(recorded) if recorded is not None else unfit_trials(study, trials)
    plan = halving.report_plan(halving.plan_from_results(study, grid, trials, results, pruned), recorded)
    ranked = [t for t in trials if not t.node_control_of and t.id not in pruned]
    rungs = halving.study_rungs(study, grid, len(ranked))
    return StoredSearch(halving.rung_study(study, rungs),
                        HalvingNote(sweep_id=label, plan=plan, labels={t.id: t.label for t in trials}), fit)
