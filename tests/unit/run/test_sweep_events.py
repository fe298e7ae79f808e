"""The driver's one event sink (farm/run/events.py, issue 52 item 2): `run_sweep` takes the plan and a
`SweepEvents`; the default hears everything and shows nothing, and the terminal view subscribes with
its own, printing what it printed from its callbacks (the driver stood in for: no Ray here)."""

from __future__ import annotations

import inspect

import pytest

from farm.run import terminal
from farm.run.events import SweepEvents
from farm.run.sweep_plan import SweepPlan
from farm.study.grid import expand

KINDS = ("on_trial", "on_sweep", "on_pass", "on_rung", "on_ray", "on_schedule", "on_accelerator", "on_lease")


def test_run_sweep_takes_one_plan_and_one_sink():
    from farm.run import driver

    assert list(inspect.signature(driver.run_sweep).parameters) == ["plan", "events"]
    assert inspect.signature(driver.run_sweep).parameters["events"].default is None


def test_the_default_sink_hears_every_kind_and_does_nothing():
    events = SweepEvents()
    calls = {"on_trial": ("started", object(), None), "on_sweep": ("s",), "on_pass": (object(),),
             "on_rung": (object(),), "on_ray": (None, True), "on_schedule": ("line",), "on_accelerator": ("line",),
             "on_lease": ("line",)}
    assert set(calls) == set(KINDS)
    for name, args in calls.items():
        assert getattr(events, name)(*args) is None


def test_the_terminal_view_subscribes_and_prints_as_before(study, monkeypatch, capsys):
    from actors.bench import TrialJob
    from farm.run import driver
    from farm.run.sweep_view import flags_text, run_and_report

    monkeypatch.setattr(terminal.console, "_file", None)  # stdout as pytest captures it
    monkeypatch.setattr(terminal.console, "quiet", False)
    monkeypatch.setitem(terminal._state, "mode", "normal")
    trials = expand(study, "smoke")
    plan = SweepPlan(study=study, grid="smoke", trials=trials, tracking_uri="sqlite:///unused.db")
    t = trials[0]
    job = TrialJob(sweep_id="s", trial=t, engine_spec=study.engines[t.engine], profiles={}, repeats=1,
                   min_success_rate=study.min_success_rate, workdir="")
    heard: dict = {}

    def run_sweep(given, events=None):
        heard.update(plan=given, events=events)
        events.on_schedule("schedule: the seed's durations")
        events.on_accelerator("accelerator: H200 (from the cluster)")
        events.on_lease("waiting for the sweep's other driver")
        events.on_trial("started", job, None)
        raise KeyboardInterrupt

    monkeypatch.setattr(driver, "run_sweep", run_sweep)
    with pytest.raises(SystemExit) as ended:
        run_and_report(plan)
    assert ended.value.code == 130
    assert heard["plan"] is plan and isinstance(heard["events"], SweepEvents)
    assert all(getattr(type(heard["events"]), k) is not getattr(SweepEvents, k) for k in KINDS)  # each one shown
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["schedule: the seed's durations", "accelerator: H200 (from the cluster)",
                         "waiting for the sweep's other driver"]
    assert lines[3].endswith(f"start   {t.label} ({flags_text(t)}) attempt 1") and lines[3].startswith("[")
    assert lines[4:] == ["interrupted before the sweep started"]
