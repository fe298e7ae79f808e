"""A sweep submitted through the Ray Jobs API names its MLflow run in the job's metadata.

A real Ray head on this machine (`ray start --head`, token authentication on, free ports) runs a
real job that does what the sweep's driver does once it has a sweep id
(`farm.run.jobs.tag_sweep_with_submission` -> `add_job_metadata`); the Jobs API then shows the
link beside the metadata the submission set, after the job ended (Ray's own status writes keep it).
The node is stopped through the process group this test started.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from raynodes import start_node
from sweeptools import isolated_env

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
LINK = "http://127.0.0.1:5000/#/experiments/1/runs/0123456789abcdef"

SCRIPT = f"""
import os, ray
ray.init(address="auto")
from farm.run.jobs import add_job_metadata, SUBMISSION_ENV
ok = add_job_metadata(os.environ[SUBMISSION_ENV], {{"farm.sweep_id": "0123456789abcdef", "farm.mlflow_run": "{LINK}"}})
print("ADDED", ok)
"""


# The submitting side, in a process of its own: Ray's token mode is process state (its config is
# read once), and the tests after this one start clusters without a token in pytest's process.
SUBMIT = """
import json, shlex, sys, time
from ray.job_submission import JobSubmissionClient
address, script, submission_env, repo = sys.argv[1:5]
client = JobSubmissionClient(address)
job = client.submit_job(entrypoint=f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}",
                        submission_id="farm-test-metadata",
                        runtime_env={"env_vars": {submission_env: "farm-test-metadata", "PYTHONPATH": repo}},
                        metadata={"farm.grid": "smoke", "farm.study": "qwen3.5-35b-a3b"})
deadline = time.monotonic() + 240
while str(client.get_job_status(job).value) not in ("SUCCEEDED", "FAILED", "STOPPED") and time.monotonic() < deadline:
    time.sleep(1)
info = client.get_job_info(job)
print(json.dumps({"status": str(info.status.value), "metadata": info.metadata, "logs": client.get_job_logs(job)}))
"""


def test_the_jobs_metadata_names_the_sweep_and_its_mlflow_run(tmp_path):
    from farm.run.jobs import SUBMISSION_ENV

    (tmp_path / "home").mkdir()
    token = secrets.token_hex(16)
    env = {**isolated_env(tmp_path / "home"), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    head = start_node(env, head=True, num_cpus=1, log_dir=tmp_path)
    try:
        done = subprocess.run([sys.executable, "-c", SUBMIT, f"http://127.0.0.1:{head.ports['dashboard']}", SCRIPT,
                               SUBMISSION_ENV, str(REPO)], env={**env, "PYTHONPATH": str(REPO)},
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out["status"] == "SUCCEEDED", out["logs"][-2000:]
        assert "ADDED True" in out["logs"]
        assert out["metadata"] == {"farm.grid": "smoke", "farm.study": "qwen3.5-35b-a3b",
                                   "farm.sweep_id": "0123456789abcdef", "farm.mlflow_run": LINK}
        assert token not in json.dumps(out["metadata"]) and token not in out["logs"]
    finally:
        head.stop()
