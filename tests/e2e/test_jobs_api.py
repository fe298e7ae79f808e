"""A real Ray cluster on this machine (`ray start --head` and a second `ray start --address`
node, token authentication on, everything on 127.0.0.1 and free ports), a real MLflow server
started with `farm server`, and `farm sweep --address http://127.0.0.1:PORT` of a study of two
mock trials and one profile (tests/sweeptools.py: route_study) submitted through the Ray Jobs API
from a "laptop" that has only the token; the same study through Ray Client.

The head is the session's (tests/conftest.py: token_head); the second node and the server are
stopped through the process groups this module started (never `ray stop`, never a kill by name).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from raynodes import free_ports, start_node, stop_group
from farm.run.links import mlflow_run_link
from farm.study.load import load_study
from sweeptools import isolated_env, route_study, start_farm_server, stored_results

pytestmark = pytest.mark.slow


def _farm(*args: str, cwd: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    """`farm` with exactly `env` (nothing of this test process's Ray state leaks in)."""
    return subprocess.run([sys.executable, "-m", "farm.cli", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, token_head):
    """The session's token-auth head (tests/conftest.py: token_head) and a second node of this
    module's own, stopped at its end."""
    tmp = tmp_path_factory.mktemp("jobs")
    head = token_head["node"]
    worker = start_node(token_head["env"], head=False, gcs_port=head.ports["gcs"], num_cpus=1, log_dir=tmp)
    try:
        yield {"address": token_head["jobs"], "token": token_head["token"], "tmp": tmp, "nodes": [head, worker],
               "client": token_head["client"]}
    finally:
        worker.stop()


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mlflow-server")
    (port,) = free_ports(1)
    log = tmp / "server.log"
    proc = start_farm_server(tmp / "store", port, env=isolated_env(tmp), log=log, timeout=90)
    try:
        yield {"uri": f"http://127.0.0.1:{port}", "store": tmp / "store", "log": log}
    finally:
        stop_group(proc)


@pytest.fixture(scope="module")
def study(cluster):
    """Two mock trials, one profile (tests/sweeptools.py): a study from outside the project, which
    travels with the job."""
    path = route_study(cluster["tmp"] / "routes.yaml")
    return {"path": path, "name": load_study(path).name}


@pytest.fixture(scope="module")
def submitted(cluster, mlflow_server, study):
    laptop = cluster["tmp"] / "laptop"
    laptop.mkdir()
    env = {**isolated_env(laptop), "RAY_AUTH_TOKEN": cluster["token"]}  # the token, and nothing else of Ray's
    proc = _farm("sweep", "--address", cluster["address"], "--config", str(study["path"]), "--grid", "two",
                 "--tracking-uri", mlflow_server["uri"], cwd=laptop, env=env)
    return proc


def test_the_job_succeeds_and_its_log_is_followed(submitted, cluster):
    proc = submitted
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    out = proc.stdout
    job = out.split("submitted job ", 1)[1].split(":", 1)[0]
    assert job.startswith("farm-")
    assert f"dashboard: {cluster['address']}/#/jobs/{job}" in out
    # the job's own output (the sweep on the head), streamed here
    assert "recommended" in out and "--ttft-ms=50" in out.split("recommended", 1)[1]
    # then the job's end as the Jobs API reports it
    assert f"job {job} succeeded" in out.splitlines(), out[-2000:]


# The Jobs API as a user's `ray job list` reads it, in a process of its own (Ray's token mode is
# process state, read once).
JOB_INFO = """
import json, sys
from ray.job_submission import JobSubmissionClient
info = JobSubmissionClient(sys.argv[1]).get_job_info(sys.argv[2])
print(json.dumps({"status": str(info.status.value), "metadata": info.metadata}))
"""


def test_the_jobs_metadata_names_its_sweep_and_mlflow_run(submitted, cluster, mlflow_server, study):
    """farm's own path: the sweep's driver, inside the job, adds its sweep id and MLflow link to
    the job's metadata (farm/run/jobs.py); the Jobs API shows them beside the submission's own
    metadata after the job ended."""
    from mlflow.tracking import MlflowClient

    from farm.store import schema

    assert submitted.returncode == 0
    job = submitted.stdout.split("submitted job ", 1)[1].split(":", 1)[0]
    env = {**isolated_env(cluster["tmp"] / "laptop"), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": cluster["token"]}
    read = subprocess.run([sys.executable, "-c", JOB_INFO, cluster["address"], job], env=env, capture_output=True,
                          text=True, timeout=120)
    assert read.returncode == 0, read.stderr[-2000:]
    info = json.loads(read.stdout.strip().splitlines()[-1])
    client = MlflowClient(mlflow_server["uri"])
    exp = client.get_experiment_by_name(study["name"])
    (sweep,) = client.search_runs([exp.experiment_id], filter_string=schema.submission_filter(job))
    assert info["status"] == "SUCCEEDED"
    assert info["metadata"] == {
        schema.GRID_TAG: "two", schema.STUDY_TAG: study["name"],
        schema.TRACKING_URI_JOB_KEY: mlflow_server["uri"], schema.SWEEP_TAG: sweep.info.run_id,
        schema.MLFLOW_RUN_JOB_KEY: mlflow_run_link(mlflow_server["uri"], exp.experiment_id, sweep.info.run_id)}
    assert "metadata does not name the sweep" not in submitted.stdout  # no warning in the job's log


def test_results_landed_in_the_mlflow_server_from_both_nodes(submitted, mlflow_server, study):
    from mlflow.tracking import MlflowClient

    assert submitted.returncode == 0
    client = MlflowClient(mlflow_server["uri"])
    exp = client.get_experiment_by_name(study["name"])
    sweeps = client.search_runs([exp.experiment_id], filter_string="tags.`farm.kind` = 'sweep'")
    assert len(sweeps) == 1 and sweeps[0].data.tags["farm.status"] == "finished"
    assert sweeps[0].data.tags["farm.submission_id"].startswith("farm-")
    children = client.search_runs([exp.experiment_id], filter_string="tags.`farm.kind` = 'trial'")
    assert len(children) == 2 and {c.data.tags["farm.status"] for c in children} == {"ok"}
    # artifacts went over HTTP into the server's artifact store
    stored = list((mlflow_server["store"] / "artifacts").rglob("engine.log"))
    assert len(stored) == 2
    nodes = {r["node_id"] for r in stored_results(mlflow_server["uri"], children, mlflow_server["store"].parent)}
    assert len(nodes) == 2, "the trials spread over both nodes"


def test_farm_status_reports_the_sweep_finished(submitted, cluster, mlflow_server):
    assert submitted.returncode == 0
    laptop = cluster["tmp"] / "laptop"
    env = {**isolated_env(laptop), "RAY_AUTH_TOKEN": cluster["token"]}
    proc = _farm("status", "--tracking-uri", mlflow_server["uri"], "--address", cluster["address"], cwd=laptop, env=env)
    assert proc.returncode == 0, proc.stderr
    assert ": finished" in proc.stdout.splitlines()[0]
    assert "2 done, 0 failed, 0 running, 0 pending" in proc.stdout


def test_the_token_appears_nowhere(submitted, cluster, mlflow_server):
    token = cluster["token"]
    assert token not in submitted.stdout and token not in submitted.stderr
    for path in mlflow_server["store"].rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path
    # nor in the job's logs and the runs' engine logs on the nodes
    for node in cluster["nodes"]:
        for path in node.temp_dir.rglob("*.log"):
            assert token.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("token", [None, "wrong"])
def test_a_submission_without_the_right_token_fails_in_one_line(cluster, token):
    laptop = cluster["tmp"] / f"laptop-{token}"
    laptop.mkdir()
    env = isolated_env(laptop)
    if token:
        env["RAY_AUTH_TOKEN"] = "0" * 32
    proc = _farm("sweep", "--address", cluster["address"], "--grid", "smoke", "--tracking-uri", "http://127.0.0.1:9",
                 cwd=laptop, env=env, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --address: "), proc.stderr
    assert "Traceback" not in proc.stderr and "submitted" not in proc.stdout
    assert ("requires its token" if token is None else "rejected the token") in lines[0]


@pytest.mark.parametrize("address", ["http://127.0.0.1:9", "ray://127.0.0.1:9"])
def test_a_cluster_sweep_needs_a_tracking_server_every_node_reaches(tmp_path, address):
    proc = _farm("sweep", "--address", address, "--grid", "smoke", cwd=tmp_path, env=isolated_env(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: --tracking-uri: a sweep on a cluster needs an MLflow server")
    proc = _farm("sweep", "--address", address, "--grid", "smoke", "--tracking-uri", "sqlite:///mlflow.db",
                 cwd=tmp_path, env=isolated_env(tmp_path))
    assert proc.returncode == 2 and "is a store on this machine" in proc.stderr
    assert not (tmp_path / "mlflow.db").exists()


def _client_server_logs(head) -> str:
    """The tails of the head's Ray Client proxy and per-driver server logs: why a server did not start."""
    out = []
    for path in sorted(head.temp_dir.rglob("ray_client_server*")):
        out.append(f"\n== {path.name}\n" + path.read_text(errors="replace")[-1500:])
    return "".join(out)


def test_ray_client_runs_the_driver_here_and_the_shipped_farm_on_both_nodes(submitted, cluster, mlflow_server, study):
    """`ray://HEAD:10001`: the driver runs on the laptop, the actors on the cluster with this
    farm uploaded (a node's installed farm is not used), results in the shared server."""
    from mlflow.tracking import MlflowClient

    laptop = cluster["tmp"] / "laptop-client"
    laptop.mkdir()
    env = {**isolated_env(laptop), "RAY_AUTH_TOKEN": cluster["token"]}
    proc = _farm("sweep", "--address", cluster["client"], "--config", str(study["path"]), "--grid", "two",
                 "--tracking-uri", mlflow_server["uri"], "--experiment", "ray-client", cwd=laptop, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:] + _client_server_logs(cluster["nodes"][0])
    assert "recommended" in proc.stdout
    assert f"results:  {mlflow_server['uri']}" in proc.stdout
    assert cluster["token"] not in proc.stdout + proc.stderr
    assert not (laptop / "farm-runs").exists() and not (laptop / "mlflow.db").exists()  # nothing written here
    client = MlflowClient(mlflow_server["uri"])
    exp = client.get_experiment_by_name("ray-client")
    children = client.search_runs([exp.experiment_id], filter_string="tags.`farm.kind` = 'trial'")
    assert len(children) == 2 and {c.data.tags["farm.status"] for c in children} == {"ok"}
    nodes = {r["node_id"] for r in stored_results(mlflow_server["uri"], children, laptop)}
    assert len(nodes) == 2, "the trials spread over both nodes"
    # every trial's files were written in the uploaded working directory on its node
    runs = [p for node in cluster["nodes"] for p in node.temp_dir.rglob("farm-runs") if "working_dir_files" in str(p)]
    assert runs, "no farm-runs under the uploaded working directory"


def test_a_failing_job_fails_the_command_with_the_jobs_exit_code(submitted, cluster, mlflow_server):
    laptop = cluster["tmp"] / "laptop"
    env = {**isolated_env(laptop), "RAY_AUTH_TOKEN": cluster["token"]}
    # The job's own preflight on the head refuses an unknown sweep: `farm sweep` there exits 2.
    proc = _farm("sweep", "--address", cluster["address"], "--grid", "smoke", "--tracking-uri", mlflow_server["uri"],
                 "--resume", "0" * 32, cwd=laptop, env=env, timeout=300)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert f"error: --resume: no sweep with id '{'0' * 32}'" in proc.stdout  # the job's log, followed here
    assert "failed" in proc.stdout.strip().splitlines()[-1]


def test_no_wait_returns_after_submitting(submitted, cluster, mlflow_server):
    laptop = cluster["tmp"] / "laptop"
    env = {**isolated_env(laptop), "RAY_AUTH_TOKEN": cluster["token"]}
    proc = _farm("sweep", "--address", cluster["address"], "--grid", "smoke", "--tracking-uri", mlflow_server["uri"],
                 "--resume", "0" * 32, "--no-wait", cwd=laptop, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "submitted job farm-" in proc.stdout and "detached" in proc.stdout
