"""What a running sweep tells whoever watches it (issue 52 item 2): one event sink, `SweepEvents`, with
one method a kind of event the driver (farm/run/driver.py `run_sweep`) emits. Each method does nothing
here; a subscriber overrides the ones it shows: the terminal view (farm/run/sweep_view.py
`run_and_report`), a test that records what it heard. The Ray dashboard's metrics hear the trial
events beside the sink (farm/run/metrics.py `watch`, wrapped around `on_trial` by the driver)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from actors.bench import TrialJob
    from farm.analysis.plan import PassPlan
    from farm.analysis.results import TrialResult


class SweepEvents:
    """A sweep's events, none shown: subclass it and override what a view shows."""

    def on_trial(self, kind: str, job: TrialJob, result: TrialResult | None) -> None:
        """A trial job's progress: `started`, `placed`, `retry` (with the attempt's result), `finished`
        (a trial's first job: one more trial of the sweep) or `pass_finished` (a job that ran a trial
        again: a later pass, rung or step)."""

    def on_sweep(self, sweep_id: str) -> None:
        """The sweep's id, once its parent run exists (new or resumed)."""

    def on_pass(self, plan: PassPlan) -> None:
        """`--repeats auto`: the next pass planned, or the passes done."""

    def on_rung(self, plan: object) -> None:
        """A halving rung or a local search's step planned, or the search done (the strategy's plan)."""

    def on_ray(self, dashboard_url: str | None, local: bool) -> None:
        """Ray is up: its dashboard's address (None where the context has none), and whether this
        sweep started it (a local Ray, gone with the sweep)."""

    def on_schedule(self, line: str) -> None:
        """One line: where the scheduler's estimates come from (a scheduled grid only)."""

    def on_accelerator(self, line: str) -> None:
        """One line: the GPU model `accelerator_type: auto` resolved to."""

    def on_lease(self, line: str) -> None:
        """One line, when a resume waits for another driver of the sweep to end (`--wait-lease`)."""
