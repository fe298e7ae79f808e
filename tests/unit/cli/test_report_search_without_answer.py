"""`farm report` of a local search that ended without an answer, on the H100's committed store
(sweep 315bba48..., bench/h100/from-seed/store.tgz: the search from the seed's command over four
sittings on four lent H100s, its 1 GPU-hour budget spent in step 1). Nothing can be selected on
the study's profiles (the final comparison never ran), so the report is the search's path: farm's
repair of the command that could not start, what each raced neighbour showed against it, which of
them are decided and which are not, and why. Read without the model's config.json (as on any
machine but the sweep's): the sweep's recorded plan and repairs carry what the memory-fit model
decided there."""

from __future__ import annotations

import json
import pytest

from conftest import H100_SEARCH as SWEEP, h100_search_store, run_farm


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("h100-search")
    return tmp, h100_search_store(tmp)


def _judged(lines: list[str], axis: str) -> str:
    (line,) = [line.strip() for line in lines if line.startswith("    ") and f": {axis}" in line]
    return line


def test_the_report_of_a_search_without_an_answer_is_its_path(store):
    tmp, uri = store
    out = run_farm("report", SWEEP, "--tracking-uri", uri, "--format", "text", cwd=tmp)
    # no recommendation: farm sweep's exit code for it
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("farm's repair of your command (") and (
        "stands: step 1: no raced neighbour of vllm-1ffa2a61 is significantly better by 3 %, but 3 cannot yet be "
        "told from it") in lines[0]
    # the user's command, said not to start on the H100 before any GPU time, first among the repairs
    repairs = [line.strip() for line in lines if "does not start on H100" in line]
    assert repairs[0].startswith("your command does not start on H100 (predicted before any start): 2,048 requests")
    assert repairs[0].endswith("farm's repair: max_running_requests = 1,463")
    # the incumbent's runs: 5 in the first sitting, 5 more as a control in each of the third and fourth
    (step,) = [line.strip() for line in lines if line.strip().startswith("step 1 ")]
    assert step.endswith("(15 runs) -> stays: undecided (more runs would tell)")
    # GPU memory 0.95 measured beside the control on the fourth sitting's machine: a proven equivalence
    assert "gpu_memory_fraction default -> 0.95: +0.2 % [-0.6, +0.9], equivalent within ±3 %" in \
        _judged(lines, "gpu_memory_fraction")
    # prefix caching off and the FP8 KV cache ran on the second sitting's machine, where the
    # incumbent never did: no comparison through machines, however close the numbers look
    for axis in ("prefix_caching True -> False", "kv_cache_dtype default -> fp8"):
        assert "cannot be told from the incumbent: across machines, no shared control" in _judged(lines, axis)
    # KV offload: refused by the engine at start, a final status, so not a candidate rather than open
    assert _judged(lines, "kv_offload").endswith(
        "measured nothing (engine_failed_to_start: the engine core failed to initialize: ValueError: Connector "
        "OffloadingConnector does not support HMA but HMA is enabled. Please set `--disable-hybrid-kv-cache-manager`.)"
        ": not run again, so not a candidate")
    assert lines[-1].strip().startswith("ended: a neighbour could not be told from the incumbent (step 1: ")
    assert lines[-1].endswith("stays until more runs tell")


def test_its_json_says_done_and_recommends_nothing(store):
    tmp, uri = store
    out = run_farm("report", SWEEP, "--tracking-uri", uri, "--format", "json", cwd=tmp)
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    assert data["done"] is True and data["recommended"] is None
    (search,) = data["local_search"]
    assert search["given_start"] != search["start"] and search["done"] and search["stop"] == "undecided"
    step = search["steps"][0]
    assert step["race"][0] == search["start"] and len(step["race"]) == 6 and len(step["unraced"]) == 4
    decided = {j["neighbour"]["trial"]: (j["decision"], j["settled"]) for j in step["judged"]}
    assert decided["vllm-ba4b5c26"] == ("failed", True) and decided["vllm-d19a1e96"] == ("equivalent", True)
    assert sum(not settled for _, settled in decided.values()) == 3


def test_it_replays_the_race_the_sweep_chose_where_this_machine_would_choose_another(store):
    """Here the models' config.json is absent, so the memory-fit model cannot rule out the bf16
    trial the H100's sweep ruled out (64.7 GiB of weights): replayed afresh, the step's race would
    take it in place of the sweep's fifth neighbour. The report shows the race the sweep ran."""
    tmp, uri = store
    stored = next(tmp.glob(f"mlruns/*/{SWEEP}/artifacts/local_search.json"))
    chosen = json.loads(stored.read_text())["steps"][0]
    out = run_farm("report", SWEEP, "--tracking-uri", uri, "--format", "json", cwd=tmp)
    (search,) = json.loads(out.stdout)["local_search"]
    step = search["steps"][0]
    assert step["race"] == chosen["race"] and step["unraced"] == chosen["unraced"]
    assert search["trials"] == []


def test_the_sweep_says_why_it_recommends_nothing_in_the_searchs_words(store):
    """The sweep's last line on the machine was "no eligible trial on the primary profile: every run
    failed or fell below the minimum success rate", though every raced trial but one measured: the
    search's runs are on its rung, and only the final comparison, never reached, measures the primary
    profile. The sweep now ends with the search's own ending."""
    from farm.run.sweep_report import build
    from farm.store.mlflow_store import MlflowStore

    tmp, uri = store
    mlflow_store = MlflowStore(uri, key="--tracking-uri")
    study, info = mlflow_store.study(SWEEP), mlflow_store.sweep(SWEEP)
    report, why, _ = build(study, info.grid, mlflow_store.results(SWEEP), SWEEP, tmp / "out", uri=uri)
    assert report is None and why.exit_code == 1
    assert why.startswith("the local search ended: a neighbour could not be told from the incumbent (step 1: ")
    assert "; no answer yet: farm's repair of your command (performance-mode=throughput" in why
    assert why.endswith("(repaired: max_running_requests=1463)) stays until more runs tell")
    assert "every run failed" not in why
