"""A sweep submitted through the Ray Jobs API names its MLflow run in the job's metadata.

A real Ray head on this machine (`ray start --head`, token authentication on, free ports) runs a
real job that does what the sweep's driver does once it has a sweep id
(`farm.run.jobs.tag_sweep_with_submission` -> `add_job_metadata`); the Jobs API then shows the
link beside the metadata the submission set, after the job ended (Ray's own status writes keep it).
The node is stopped through the process group this test started.
"""

from __future__ import annotations

import os
import secrets
import shlex
import sys
import time
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


def test_the_jobs_metadata_names_the_sweep_and_its_mlflow_run(tmp_path):
    from ray.job_submission import JobSubmissionClient

    from farm.run.jobs import SUBMISSION_ENV

    (tmp_path / "home").mkdir()
    token = secrets.token_hex(16)
    env = {**isolated_env(tmp_path / "home"), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    head = start_node(env, head=True, num_cpus=1, log_dir=tmp_path)
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    try:
        os.environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token})
        from ray._raylet import Config

        Config.initialize("")  # Ray's way to make this process see the mode set above (farm.run.jobs does the same)
        client = JobSubmissionClient(f"http://127.0.0.1:{head.ports['dashboard']}")
        job = client.submit_job(entrypoint=f"{shlex.quote(sys.executable)} -c {shlex.quote(SCRIPT)}",
                                submission_id="farm-test-metadata",
                                runtime_env={"env_vars": {SUBMISSION_ENV: "farm-test-metadata", "PYTHONPATH": str(REPO)}},
                                metadata={"farm.grid": "smoke", "farm.study": "qwen3.5-35b-a3b"})
        deadline = time.monotonic() + 240
        while str(client.get_job_status(job).value) not in ("SUCCEEDED", "FAILED", "STOPPED"):
            assert time.monotonic() < deadline, client.get_job_logs(job)[-2000:]
            time.sleep(1)
        logs = client.get_job_logs(job)
        info = client.get_job_info(job)
        assert str(info.status.value) == "SUCCEEDED", logs[-2000:]
        assert "ADDED True" in logs
        assert info.metadata == {"farm.grid": "smoke", "farm.study": "qwen3.5-35b-a3b",
                                 "farm.sweep_id": "0123456789abcdef", "farm.mlflow_run": LINK}
        assert token not in str(info.metadata) and token not in logs
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        from ray._raylet import Config

        Config.initialize("")
        head.stop()
