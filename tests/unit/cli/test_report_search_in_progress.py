"""`farm report` of a local search still under way, on the H100's committed store (sweep
315bba48..., bench/h100/from-seed/store.tgz: the search from the seed's command, four of the six
trials of its first step measured and one that measured nothing (its engine refused the flags),
over three sittings, the incumbent run again as a control in the third). Nothing can be selected on the study's profiles yet, so the report is the
path so far: the start that could not start and farm's repair of it, what each raced trial measured,
and how to continue. Read without the model's config.json (as on any machine but the sweep's): the
sweep's recorded plan and repairs carry what the memory-fit model decided there."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from conftest import run_farm

REPO = Path(__file__).resolve().parents[3]
SWEEP = "315bba48402047149c6cf8f80855632e"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("h100-search")
    with tarfile.open(REPO / "bench/h100/from-seed/store.tgz") as tar:
        tar.extractall(tmp, filter="data")
    return tmp, f"sqlite:///{tmp / 'mlflow.db'}"


def test_the_report_of_a_search_in_progress_is_its_path_so_far(store):
    tmp, uri = store
    out = run_farm("report", SWEEP, "--tracking-uri", uri, "--format", "text", cwd=tmp)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Search in progress: no answer yet (step 1: ") and f"farm sweep --resume {SWEEP}" in lines[0]
    # the user's command, said not to start on the H100 before any GPU time, first among the repairs
    repairs = [line.strip() for line in lines if "does not start on H100" in line]
    assert repairs[0].startswith("your command does not start on H100 (predicted before any start): 2,048 requests")
    assert repairs[0].endswith("farm's repair: max_running_requests = 1,463")
    # the step under way, its incumbent's runs counted (its 5 of the first sitting and the 5 of its
    # control in the third), what its trials measured so far (5 runs each of the step's shortened
    # profile), and the trial that measured nothing, with the engine's own cause
    (step,) = [line.strip() for line in lines if line.strip().startswith("step 1 ")]
    assert step.endswith("(10 runs) -> under way: 4 of 6 trials measured, 1 measured nothing")
    so_far = [line.strip() for line in lines if "run(s) so far" in line]
    assert len(so_far) == 4 and sorted(int(line.split(": ")[-1].split(" run")[0]) for line in so_far) == [5, 5, 5, 10]
    assert "(repaired: max_running_requests=1463): 10 run(s) so far, mean 10,799 total tok/s" in so_far[0]
    (nothing,) = [line.strip() for line in lines if "measured nothing (" in line]
    assert "kv_offload=64" in nothing and nothing.endswith(
        "measured nothing (engine_failed_to_start: the engine core failed to initialize: ValueError: Connector "
        "OffloadingConnector does not support HMA but HMA is enabled. Please set `--disable-hybrid-kv-cache-manager`.)")


def test_its_json_says_not_done_and_recommends_nothing(store):
    tmp, uri = store
    out = run_farm("report", SWEEP, "--tracking-uri", uri, "--format", "json", cwd=tmp)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["done"] is False and data["recommended"] is None
    (search,) = data["local_search"]
    assert search["given_start"] != search["start"] and not search["done"]
    step = search["steps"][0]
    assert step["race"][0] == search["start"] and len(step["race"]) == 6 and len(step["unraced"]) == 4
    assert sorted(len(v) for v in step["so_far"].values()) == [5, 5, 5, 10]
    assert list(step["measured_nothing"]) == ["vllm-ba4b5c26"]


def test_it_replays_the_race_the_sweep_chose_where_this_machine_would_choose_another(store):
    """Here the models' config.json is absent, so the memory-fit model cannot rule out the bf16
    trial the H100's sweep ruled out (64.7 GiB of weights): replayed afresh, the step's race would
    take it in place of the sweep's fifth neighbour. The report shows the race the sweep ran, and
    the one trial it has left (the other not measured refused to start: it is not run again)."""
    tmp, uri = store
    stored = next(tmp.glob(f"mlruns/*/{SWEEP}/artifacts/local_search.json"))
    chosen = json.loads(stored.read_text())["steps"][0]
    out = run_farm("report", SWEEP, "--tracking-uri", uri, "--format", "json", cwd=tmp)
    assert out.returncode == 0, out.stderr
    (search,) = json.loads(out.stdout)["local_search"]
    step = search["steps"][0]
    assert step["race"] == chosen["race"] and step["unraced"] == chosen["unraced"]
    measured = set(step["so_far"])
    left = [t for t in step["race"] if t not in measured and t not in step["measured_nothing"]]
    assert search["trials"] == left and len(left) == 1
