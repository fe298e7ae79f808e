"""Compile caches travel (actors/compile_cache.py): a group compiled on one node starts warm on
another, through the sweep's registry in Ray's object store (the session's simulated cluster,
tests/conftest.py: two worker nodes, each its own farm cache) and through a directory every machine sees (two sweeps, two node
caches); a damaged pack is discarded and the start goes cold. Real Ray, real mock servers with
their simulated compile (cold 2 s, warm 0.2 s), real guidellm runs."""

from __future__ import annotations

import json
import tarfile

import pytest
import yaml

from conftest import run_farm

pytestmark = pytest.mark.slow

MOCK = {"gpus": 0, "start-s": 2, "warm-start-s": 0.2, "graph": "g1"}


def _study(tmp_path, **extra) -> dict:
    return {"name": "cache-test", "experiment": "cache-test",
            "models": {"tiny": {"name": "farm-tiny", "tokenizer": "farm:tiny"}},
            "engines": {"mock": {"ready_timeout_s": 120}},
            "profiles": {"quick": {"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8}, "rate": 1000,
                                   "requests": 4, "max_concurrency": 4, "max_seconds": 60}},
            "primary_profile": "quick", "max_retries": 0,
            "grids": {"one": {"blocks": [{"engine": "mock", "models": ["tiny"], "flags": MOCK,
                                          "axes": {"ttft-ms": [5, 10]}}]}}, **extra}


def test_a_group_compiled_on_one_node_starts_warm_on_the_other_through_the_object_store(tmp_path, sim_cluster):
    import ray

    from actors.bench import TrialJob
    from farm.run import driver
    from farm.study.grid import expand
    from farm.study.load import load_study

    (tmp_path / "study.yaml").write_text(yaml.safe_dump(_study(tmp_path)))
    study = load_study(tmp_path / "study.yaml")
    first, second = expand(study, "one")  # one compile group (the same graph), two trials
    nodes = sim_cluster.workers  # each with a farm cache of its own
    sim_cluster.connect()
    try:
        where = driver._compile_cache(study, "s" * 32)  # two nodes: the sweep's registry
        assert where == f"ray:farm-{'s' * 32}"

        def job(t):
            return TrialJob(sweep_id="s" * 32, trial=t, engine_spec=study.engines["mock"],
                            profiles={"quick": study.profiles["quick"]}, workdir=str(tmp_path / "runs"),
                            compile_cache=where)

        results = driver.run_trials([job(first), job(second)], max_in_flight=1, max_retries=0,
                                    pins={first.id: nodes[0].node_id, second.id: nodes[1].node_id})
    finally:
        ray.shutdown()
    a, b = sorted(results, key=lambda r: r.started_at)
    assert a.status.value == b.status.value == "ok", [(r.trial.label, r.reason) for r in results]
    assert a.node_id != b.node_id
    assert a.engine_reported["compile_cache_hit"] is False, a.engine_reported
    assert a.engine_reported.get("compile_cache_published", {}).get("files", 0) >= 1, a.engine_reported
    assert b.engine_reported["compile_cache_pulled"]["from"] == "the sweep's Ray object store"
    # warm on a node that had never compiled it: read from what the engine's log says of its start
    # ("farm mock: compile cache warm"), not from its clock, which a busy machine stretches
    assert b.engine_reported["compile_cache_hit"] is True


def test_a_directory_of_packs_warms_the_next_sweep_on_another_machine_and_a_damaged_one_is_discarded(tmp_path):
    from farm.study.grid import expand
    from farm.study.load import load_study

    shared = tmp_path / "shared-cache"
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(_study(tmp_path, compile_cache=str(shared))))
    trial_id = expand(load_study(path), "one")[0].id
    first = _cli_result(tmp_path, "runs-1", path, "machine-1", trial_id)
    assert first["compile_cache_hit"] is False and first["compile_cache_published"]["to"] == f"directory {shared}"
    second = _cli_result(tmp_path, "runs-2", path, "machine-2", trial_id)
    assert second["compile_cache_pulled"]["from"] == f"directory {shared}" and second["compile_cache_hit"] is True
    # a damaged pack: discarded with the reason, the start goes cold, the trial is measured
    pack = next(shared.glob("*.tgz"))
    pack.write_bytes(pack.read_bytes()[:100])
    third = _cli_result(tmp_path, "runs-3", path, "machine-3", trial_id)
    assert "checksum" in third["compile_cache_discarded"] and third["compile_cache_hit"] is False
    # ...and the cold start published a good pack over it, for the next machine
    assert third["compile_cache_published"]["bytes"] == pack.stat().st_size and tarfile.is_tarfile(pack)


def _cli_result(tmp_path, name, path, node, trial_id) -> dict:
    proc = run_farm("sweep", "--config", str(path), "--grid", "one", "--trial", trial_id,
                    "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--workdir", str(tmp_path / name),
                    "--json", cwd=tmp_path, env={"FARM_CACHE_DIR": str(tmp_path / node)}, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    from farm.store.tracking import load_results

    sweep_id = json.loads(proc.stdout)["sweep_id"]
    (result,) = load_results(f"sqlite:///{tmp_path / 'mlflow.db'}", sweep_id)
    assert result.status.value == "ok", result.reason
    return result.engine_reported
