"""A trial whose engine overrides its knob back to a trial already measured is not measured twice
(real Ray: the session's head, tests/conftest.py; real MLflow, guidellm and mock-server engines).

The mock's `slots` is the engine's own cap on requests at once, as SGLang's mamba state slots cap
`--max-running-requests` on the H200 (512 asked, 79 run, the default's server to the token):

- `default`: 2 slots, nothing asked: runs 2 at once, measured;
- `asked_4`: `max_running_requests: 4`, capped to 2 by its log: the default's server: `same_server`,
  naming it, its engine stopped once ready, no run;
- `asked_1`: `max_running_requests: 1`, honoured: another server, measured.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_farm
from sweeptools import write_study

pytestmark = pytest.mark.slow

FLAGS = {"slots": 2, "ttft-ms": 5, "itl-ms": 1}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, ray_head):
    tmp = tmp_path_factory.mktemp("same-server")
    study = write_study(tmp / "twins.yaml", name="twins", grid="g", max_concurrent=1, blocks=[
        {"engine": "mock", "models": ["tiny"], "name": "default", "flags": FLAGS},
        {"engine": "mock", "models": ["tiny"], "name": "asked_4", "flags": FLAGS, "knobs": {"max_running_requests": 4}},
        {"engine": "mock", "models": ["tiny"], "name": "asked_1", "flags": FLAGS, "knobs": {"max_running_requests": 1}},
    ])
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    # on the session's Ray head: Ray's own start and end are not this test's subject
    proc = run_farm("sweep", "--config", str(study), "--grid", "g", "--tracking-uri", uri, "--workdir",
                    str(tmp / "runs"), "--address", ray_head, cwd=tmp)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sweep_id = next(w for w in proc.stdout.split() if len(w) == 32 and w.isalnum())
    assert f"sweep id: {sweep_id}" in proc.stdout
    return dict(proc=proc, uri=uri, tmp=tmp, study=study, sweep_id=sweep_id)


def test_the_capped_trial_is_the_default_and_runs_nothing(sweep):
    from farm.store.mlflow_store import MlflowStore

    store = MlflowStore(sweep["uri"])
    trials = {t.label: t for t in store.trials(sweep["sweep_id"])}
    assert {k: t.status for k, t in trials.items()} == {"default": "ok", "asked_4": "same_server", "asked_1": "ok"}
    assert "the same server as default" in trials["asked_4"].reason
    assert "max_running_requests: asked 4, got 2" in trials["asked_4"].reason
    runs = {r.trial.id: sum(x.status.value == "ok" for x in r.runs) for r in store.results(sweep["sweep_id"])}
    assert runs[trials["asked_4"].id] == 0 and runs[trials["default"].id] == runs[trials["asked_1"].id] == 1
    # the sweep's own output says it apart from the failures
    assert "1 trial(s) not measured:" in sweep["proc"].stdout and "trial(s) failed" not in sweep["proc"].stdout


def test_status_and_resume_count_it_as_finished(sweep):
    status = run_farm("status", sweep["sweep_id"], "--tracking-uri", sweep["uri"], cwd=sweep["tmp"])
    assert status.returncode == 0, status.stderr
    assert "1 the same server as another" in status.stdout
    line = next(x for x in status.stdout.splitlines() if "asked_4" in x)
    assert line.split()[0:2] == ["same", "server"]
    # a resumed sweep has nothing left to start: it answers from the store
    again = run_farm("sweep", "--config", str(sweep["study"]), "--grid", "g", "--tracking-uri", sweep["uri"],
                     "--resume", sweep["sweep_id"], "--json", cwd=sweep["tmp"])
    assert again.returncode == 0, again.stderr[-2000:]
    summary = json.loads(again.stdout)
    assert summary["sweep_id"] == sweep["sweep_id"] and summary["status"] == "finished"
    assert "resumed: 3 trial(s) already finished were not run again" in again.stderr
    # what it recommends is a trial that was measured
    assert summary["recommended"]["trial"] in {t.id for t in store_trials(sweep) if t.label != "asked_4"}


def store_trials(sweep):
    from farm.store.mlflow_store import MlflowStore

    return MlflowStore(sweep["uri"]).trials(sweep["sweep_id"])
