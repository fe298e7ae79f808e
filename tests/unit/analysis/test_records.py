"""Run records carry structured fields: flags as a mapping, a node control as a field. A results
file still writes the seed's `--name=value` strings, and files and stored trials from before the
`node_control_of` field still load (fast, no Ray)."""

from __future__ import annotations

import json

import pytest

from conftest import REPO, SEED_FILE
from farm.analysis.records import records_from_trials, results_from_data, results_to_data
from farm.analysis.results import ProfileRun, RunMetrics, Status, TrialResult
from farm.analysis.select import settings_for
from farm.analysis.selection.rules import serve_command
from farm.errors import UserError
from farm.study.trial import Trial

H200_RESULTS = REPO / "bench" / "h200" / "results.json"


def _data(*runs: dict) -> dict:
    return {"profiles": {"chat": {"total_requests": 10}}, "runs": list(runs)}


def _run(rid: str, flags: list[str], **extra) -> dict:
    return {"id": rid, "engine": "vllm", "model": "m", "flags": flags, "profile": "chat",
            "metrics": {"successful_requests": 10.0, "total_tps": 100.0}, **extra}


def test_a_results_file_s_cli_flags_become_a_mapping_and_are_written_back_as_they_were():
    flags = ["--max-model-len=32768", "--enable-prefix-caching", '--speculative-config={"method":"mtp","n":4}']
    results = results_from_data(_data(_run("a", flags)), "f.json")
    rec = results.records[0]
    assert rec.flags == {"max-model-len": "32768", "enable-prefix-caching": True,
                         "speculative-config": {"method": "mtp", "n": 4}}
    assert rec.cli_flags == flags
    assert results_to_data(results)["runs"][0]["flags"] == flags


@pytest.mark.parametrize("path", [SEED_FILE, H200_RESULTS], ids=["seed", "h200"])
def test_committed_results_files_load_and_round_trip(path):
    data = json.loads(path.read_text())
    results = results_from_data(data, str(path))
    assert len(results.records) == len(data["runs"])
    back = results_to_data(results)
    assert [r["flags"] for r in back["runs"]] == [r["flags"] for r in data["runs"]]
    assert results_from_data(back, "again").records == results.records


def test_a_flag_given_twice_in_a_results_file_is_refused_with_its_place():
    with pytest.raises(UserError) as exc:
        results_from_data(_data(_run("a", ["--x=1", "--y", "--x=2"])), "f.json")
    assert exc.value.key == "runs[0].flags" and "--x given twice" in exc.value.reason


def test_the_same_server_written_in_two_ways_is_one_trial():
    results = results_from_data(_data(_run("a", ['--c={"b":1,"a":2}', "--n=4"]),
                                      _run("b", ["--n=4", '--c={"a": 2, "b": 1}'])), "f.json")
    assert {r.trial for r in results.records} == {"a"}


def test_a_node_control_is_a_field_and_older_files_that_only_named_it_in_the_trial_id_still_say_so():
    old = results_from_data(_data(_run("base", []), _run("base@n2", [], trial="base@n2", node="n2")), "old.json")
    assert [r.node_control_of for r in old.records] == [None, "base"]
    written = results_to_data(old)["runs"]
    assert written[1]["node_control_of"] == "base" and "node_control_of" not in written[0]
    assert [r.node_control_of for r in results_from_data(results_to_data(old), "new").records] == [None, "base"]


def test_a_trial_stored_before_node_control_of_existed_reads_it_from_its_id():
    stored = {"id": "vllm-1234abcd@gpu-a", "engine": "vllm", "model_key": "m", "model": "m", "profiles": ["chat"]}
    assert Trial.model_validate(stored).node_control_of == "vllm-1234abcd"
    assert Trial.model_validate({**stored, "id": "vllm-1234abcd"}).node_control_of is None
    assert Trial.model_validate({**stored, "node_control_of": None}).node_control_of is None  # said explicitly: kept


def _metrics() -> RunMetrics:
    return RunMetrics(successful_requests=10, total_requests=10, success_rate=1.0, duration_s=1.0, total_input_tokens=10,
                      total_output_tokens=10, request_throughput=10, output_tps=10, total_tps=20)


def test_farm_s_own_results_become_records_with_the_trial_s_flags_and_node_control(study):
    profile = study.primary_profile
    base = Trial(id="vllm-aaaa0000", engine="vllm", model_key="bf16", model="Qwen/Qwen3.5-35B-A3B",
                 required_flags={"max-model-len": 32768}, flags={"api-key": "sk-secret", "enable-prefix-caching": True},
                 profiles=[profile])
    control = base.model_copy(update={"id": "vllm-aaaa0000@n2", "node_control_of": base.id, "index": 1})
    runs = [ProfileRun(profile=profile, status=Status.ok, metrics=_metrics())]
    trs = [TrialResult(sweep_id="s", trial=t, status=Status.ok, runs=runs, node=node) for t, node in
           ((base, "n1"), (control, "n2"))]
    recs = records_from_trials(trs, study).records
    # valued as the command line gives them, so that a record survives a results file unchanged
    assert recs[0].flags == {"max-model-len": "32768", "api-key": "***", "enable-prefix-caching": True}
    assert [r.node_control_of for r in recs] == [None, base.id]


def test_the_serve_command_of_a_record_is_rendered_from_its_flags_by_its_engine(study):
    data = _data(_run("a", ["--max-model-len=32768", "--tensor-parallel-size=2", "--enable-prefix-caching"]))
    results = results_from_data(data, "f.json")
    settings = settings_for(results.model_copy(update={"primary_profile": "chat"}),
                            study.model_copy(update={"primary_profile": "chat"}))
    command = serve_command(results.records[0], settings)
    assert command.startswith("vllm serve m ")
    # the engine's own additions for several GPUs are there: rendered by the engine, not pasted back
    assert "--tensor-parallel-size=2" in command and "--distributed-executor-backend=mp" in command
    recorded = results.records[0].model_copy(update={"command": "as recorded"})
    assert serve_command(recorded, settings) == "as recorded"
