"""Where a sweep's driver cannot add its sweep to the job's metadata, one warning line says why and
the sweep goes on.

farm's own path: a real `farm sweep` (local Ray, real guidellm and mock-server, SQLite MLflow) that
believes it runs in a Ray job (`FARM_SUBMISSION_ID`, as the Jobs API's runtime environment sets it)
whose record Ray does not have: its driver tags the sweep with the submission
(`farm.run.jobs.tag_sweep_with_submission`), and `add_job_metadata` finds no job to add to.
The metadata of a real submission is checked in tests/e2e/test_jobs_api.py.
"""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_farm
from sweeptools import isolated_env, write_study

pytestmark = pytest.mark.slow


def test_metadata_that_cannot_be_added_is_one_warning_line_and_the_sweep_goes_on(tmp_path):
    from farm.run.jobs import SUBMISSION_ENV
    from farm.store import schema

    study = write_study(tmp_path / "study.yaml", name="metadata", grid="one", max_concurrent=1,
                        blocks=[{"engine": "mock", "models": ["tiny"], "flags": {"ttft-ms": 5, "itl-ms": 1}}],
                        profile={"data": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8}, "rate": 1000,
                                 "requests": 4, "max_concurrency": 4, "max_seconds": 60})
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = isolated_env(tmp_path, **{SUBMISSION_ENV: "farm-no-such-job"})
    proc = run_farm("sweep", "--config", str(study), "--grid", "one", "--tracking-uri", uri,
                    "--workdir", str(tmp_path / "runs"), cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    warnings = [line for line in proc.stderr.splitlines() if "metadata does not name the sweep" in line]
    assert warnings == ["warning: job farm-no-such-job's metadata does not name the sweep (Ray keeps no record of "
                        "job farm-no-such-job (key _ray_internal_job_info_farm-no-such-job in namespace 'job')); "
                        "its log does"], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    # the sweep went on: finished, and tagged with the submission it believes it runs in
    sweep_id = proc.stdout.split("sweep id: ", 1)[1].split()[0]
    sweep = MlflowClient(uri).get_run(sweep_id)
    assert sweep.data.tags["farm.status"] == "finished"
    assert sweep.data.tags[schema.SUBMISSION_TAG] == "farm-no-such-job"
