"""End to end: `farm sweep --grid smoke` through the CLI, on a local Ray without GPUs, real guidellm,
real mock-server engines, a temporary SQLite MLflow store (the session's one smoke sweep,
tests/conftest.py, read here through its store and its resume's normal-mode end)."""

from __future__ import annotations

import os
from collections import Counter

import pytest
from mlflow.tracking import MlflowClient

from conftest import REPO, run_farm
from farm.study.grid import expand
from sweeptools import HANG_S, client_hosts, wait_until

pytestmark = pytest.mark.slow


def _dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split()[2] == "Z"


@pytest.fixture(scope="module")
def smoke(smoke_sweep, smoke_resumed):
    """The session's smoke sweep (tests/conftest.py), with its end in the normal mode as its resume
    prints it (nothing left to run: from the store)."""
    return smoke_resumed, smoke_sweep["uri"], smoke_sweep["tmp"]


def test_sweep_succeeds_and_recommends_the_fastest_mock(smoke, smoke_sweep):
    proc, _, _ = smoke
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "recommended" in out
    command = out.split("recommended", 1)[1].splitlines()[1]
    # ttft 50 ms and itl 10 ms are the lowest latencies of the grid: the fastest configuration
    assert "--ttft-ms=50" in command and "--itl-ms=10" in command
    assert "mock-server" in command and "--port" not in command
    assert command.strip() == smoke_sweep["summary"]["recommended"]["command"]  # the sweep's own answer
    assert "sweep id:" in out and "mlflow ui --backend-store-uri" in out


def test_every_trial_is_a_child_run_with_params_metrics_and_artifacts(smoke):
    proc, uri, _ = smoke
    assert proc.returncode == 0
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("farm-demo")  # the smoke grid's own experiment
    parents = client.search_runs([exp.experiment_id], filter_string="tags.`farm.kind` = 'sweep'")
    assert len(parents) == 1
    sweep = parents[0]
    assert sweep.info.status == "FINISHED"
    assert sweep.info.run_id in proc.stdout
    children = client.search_runs([exp.experiment_id],
                                  filter_string=f"tags.`mlflow.parentRunId` = '{sweep.info.run_id}'")
    assert len(children) == 4
    combos = set()
    for child in children:
        params, metrics = child.data.params, child.data.metrics
        combos.add((params["flag.ttft-ms"], params["flag.itl-ms"]))
        assert params["engine"] == "mock"
        assert child.data.tags["farm.status"] == "ok"
        for profile in ("smoke_chat", "smoke_generation"):
            assert metrics[f"{profile}/total_tps"] > 0
            assert metrics[f"{profile}/ttft_mean_ms"] > 0
            assert metrics[f"{profile}/tpot_mean_ms"] > 0
            assert metrics[f"{profile}/success_rate"] >= 0.9  # the profiles' SLO floor
        files = {a.path for a in client.list_artifacts(child.info.run_id, "files")}
        assert "files/engine.log" in files
        assert "files/smoke_chat-r0.json" in files and "files/smoke_generation-r0.json" in files
        assert {"result.json", "command.txt"} <= {a.path for a in client.list_artifacts(child.info.run_id)}
    assert combos == {("50", "10"), ("50", "40"), ("200", "10"), ("200", "40")}
    # the slower mock settings measure slower: latency knobs show in the numbers
    by = {(c.data.params["flag.ttft-ms"], c.data.params["flag.itl-ms"]): c.data.metrics for c in children}
    assert by[("50", "10")]["smoke_chat/total_tps"] > by[("200", "40")]["smoke_chat/total_tps"]
    assert by[("50", "40")]["smoke_generation/tpot_mean_ms"] > by[("50", "10")]["smoke_generation/tpot_mean_ms"]


def test_no_engine_outlives_the_sweep(smoke):
    import json

    proc, uri, tmp = smoke
    results = list((tmp / "runs").glob("*/*/attempt-*/engine.log"))
    assert len(results) == 4
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("farm-demo")  # the smoke grid's own experiment
    pids = []
    for child in client.search_runs([exp.experiment_id], filter_string="tags.`farm.kind` = 'trial'"):
        path = client.download_artifacts(child.info.run_id, "result.json", str(tmp))
        pids.append(json.loads(open(path).read())["engine_pid"])
    assert len(pids) == 4 and all(pids)
    wait_until(lambda: all(_dead(p) for p in pids), HANG_S, what=f"the engines {pids} to be gone")


def test_every_run_s_client_was_forked_by_the_node_s_host_and_the_host_ended_with_the_sweep(smoke, smoke_sweep):
    """guidellm is imported once a node and sweep, not once a trial: each trial's client is forked by
    its node's client host (actors/client_host.py), which ends with the sweep."""
    import json

    proc, uri, tmp = smoke
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("farm-demo")
    runs = []
    for child in client.search_runs([exp.experiment_id], filter_string="tags.`farm.kind` = 'trial'"):
        path = client.download_artifacts(child.info.run_id, "result.json", str(tmp / child.info.run_id))
        runs += json.loads(open(path).read())["runs"]
    assert len(runs) == 8 and all(run["client_forked"] is True for run in runs), runs
    hosts = smoke_sweep["client_hosts"]  # this sweep's, seen while it ran (tests/conftest.py)
    assert hosts, "no client host of the sweep was seen while it ran"
    # by the mark, not by those pids: a pid may be another process's by now
    wait_until(lambda: not client_hosts(smoke_sweep["mark"]), HANG_S, what=f"the sweep's client hosts {hosts} to be gone")


def test_every_run_has_its_steady_rate_its_lost_requests_and_its_machine(smoke):
    """Issue 45 on the sweep's own runs (real guidellm, real mock-servers): no warm-up (the mock engine
    has nothing to warm and the profiles ask for none), each run recorded its rate while the client
    held its concurrency beside the totals-based one, the requests it lost, and its GPUs as not
    measured with the reason (a mock holds no GPU), never zeros; each trial its machine, also in
    MLflow's tags."""
    import json

    _, uri, tmp = smoke
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("farm-demo")
    children = client.search_runs([exp.experiment_id], filter_string="tags.`farm.kind` = 'trial'")
    for child in children:
        path = client.download_artifacts(child.info.run_id, "result.json", str(tmp / f"warm-{child.info.run_id}"))
        result = json.loads(open(path).read())
        assert result["warmup_runs"] == []
        assert result["machine"]["gpu_not_read"] == "no GPU: the trial holds none" and result["machine"]["kernel"]
        assert child.data.tags["farm.machine"] and child.data.tags["farm.machine.kernel"] == result["machine"]["kernel"]
        assert result["machine"]["host_sha256_mib_s"] > 0 and result["machine"]["gpu_bench_not_measured"]
        assert float(child.data.tags["farm.machine.host_copy_gib_s"]) == result["machine"]["host_copy_gib_s"]
        assert child.data.tags["farm.gpu_samples"] == "not measured: no GPU: the trial holds none"
        for run in result["runs"]:
            # nor any energy: not measured, never zero joules
            assert run["gpu"] == {"measured": False, "reason": "no GPU: the trial holds none", "gpus": [],
                                  "samples": 0, "sm_clock_mhz": None, "temperature_c": None, "power_w": None,
                                  "power_total_w": None, "window_s": None, "energy_j": None}
            m = run["metrics"]
            # over the requests sent: the lost ones are no successes
            assert m["success_rate"] * m["total_requests"] + m["client_lost_requests"] <= m["total_requests"]
            if run["profile"] == "smoke_chat":  # 48 requests at 8 in flight: a steady state to measure
                assert m["steady_tps"] > 0 and 0 < m["steady_window_s"] < m["duration_s"], run
        assert child.data.metrics["smoke_chat/steady_tps"] > 0


def test_dry_run_lists_the_full_study_without_starting_anything(tmp_path):
    proc = run_farm("sweep", "--grid", "full", "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "vllm serve Qwen/Qwen3.5-35B-A3B" in proc.stdout
    assert "sglang.launch_server --model-path=Qwen/Qwen3.5-35B-A3B-FP8" in proc.stdout
    assert not (tmp_path / "mlflow.db").exists()
    assert list(tmp_path.iterdir()) == []


GPU_STUDY = """
name: needs-gpus
primary_profile: smoke_chat
include: [{smoke}]
grids:
  two_gpus:
    profiles: [smoke_chat]
    blocks:
      - {{engine: mock, models: [tiny], flags: {{gpus: 2}}}}
"""


def test_a_trial_needing_more_gpus_than_any_node_is_refused(tmp_path, ray_head):
    """A trial asks for 2 GPUs; this machine's Ray (the session's) has none: exit 2, nothing logged."""
    study = tmp_path / "study.yaml"
    study.write_text(GPU_STUDY.format(smoke=REPO / "configs" / "smoke.yaml"))
    proc = run_farm("sweep", "--config", str(study), "--grid", "two_gpus", "--tracking-uri",
                    f"sqlite:///{tmp_path / 'mlflow.db'}", "--workdir", str(tmp_path / "runs"), "--address", ray_head,
                    cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "needs 2 GPU(s) on one node" in lines[0] and "has 0" in lines[0], lines
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "runs").exists()


def _grid_line(dry_run_stdout: str, study, grid: str) -> str:
    """The dry run's line for `grid`, checked against the grid itself: as many trials as it
    expands to, per engine, and their runs (one per trial and profile)."""
    trials = expand(study, grid)
    line = next(ln.strip() for ln in dry_run_stdout.splitlines() if ln.strip().startswith(f"{grid}: "))
    runs = sum(len(t.profiles) for t in trials)
    assert line.startswith(f"{grid}: {len(trials)} trials (") and f"), {runs} runs," in line, line
    per_engine = line.split("(", 1)[1].split(")", 1)[0]
    assert sorted(per_engine.split(", ")) == sorted(f"{n} {e}" for e, n in Counter(t.engine for t in trials).items()), line
    return line


def test_dry_run_estimates_at_the_durations_the_last_sweep_measured(smoke, study, tmp_path):
    proc, uri, tmp = smoke
    assert proc.returncode == 0
    out = run_farm("sweep", "--grid", "smoke", "--dry-run", "--tracking-uri", uri, cwd=tmp)
    assert out.returncode == 0, out.stderr
    sweep_id = next(w for w in proc.stdout.split() if len(w) == 32 and w.isalnum())
    assert f"sweep id: {sweep_id}" in proc.stdout
    smoke_line = _grid_line(out.stdout, study, "smoke")
    measured = sum(len(t.profiles) for t in expand(study, "smoke"))  # every run of the smoke sweep
    assert f"durations from sweep {sweep_id} ({measured} runs): engine start mock" in out.stdout
    assert f"at durations measured in sweep {sweep_id}" in smoke_line
    # a grid whose profiles and engines that sweep never ran keeps the seed's durations
    assert "GPU-hours at the seed's measured durations" in _grid_line(out.stdout, study, "full")
    # a store that is not there is a mistake, and is not created
    missing = tmp_path / "none.db"
    bad = run_farm("sweep", "--grid", "smoke", "--dry-run", "--tracking-uri", f"sqlite:///{missing}", cwd=tmp_path)
    assert bad.returncode == 2 and "no MLflow store at" in bad.stderr and not missing.exists()
