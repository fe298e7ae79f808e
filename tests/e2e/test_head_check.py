"""`farm sweep --address http://HEAD:8265` against a real head (`ray start --head` on this
machine) whose PATH finds a `python` without farm's dependencies: one line naming that python
and what it lacks, exit 2, before the sweep's job is submitted (it used to fail half a minute
into the job with a bare ModuleNotFoundError in the job's log).

The head's `python` is a bare virtual environment (no packages at all); Ray itself runs from
this interpreter's environment, as on a head started with `/opt/venvs/farm/bin/ray start`
without that environment on PATH. Stopped through its process group (never `ray stop`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from farm.headcheck import MARK
from raynodes import BIN, start_node
from sweeptools import isolated_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bare_head(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bare-head")
    (tmp / "home").mkdir()
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(tmp / "bare")], check=True)
    path = f"{tmp / 'bare' / 'bin'}:/usr/bin:/bin"
    node = start_node(isolated_env(tmp / "home"), head=True, num_cpus=1, log_dir=tmp, path=path)
    try:
        yield {"address": f"http://127.0.0.1:{node.ports['dashboard']}", "python": tmp / "bare" / "bin" / "python",
               "tmp": tmp}
    finally:
        node.stop()


def _jobs(address: str) -> dict[str, str]:
    """submission id -> the entrypoint of every job the head knows."""
    from ray.job_submission import JobSubmissionClient

    return {job.submission_id: job.entrypoint for job in JobSubmissionClient(address).list_jobs()}


def test_a_head_whose_python_lacks_farm_is_one_line_and_exit_2_before_any_job(bare_head, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "farm.cli", "sweep", "--address", bare_head["address"],
                           "--grid", "smoke", "--tracking-uri", "http://127.0.0.1:9"],
                          cwd=tmp_path, env=isolated_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    line = lines[0]
    assert line.startswith(f"error: --address: the head at {bare_head['address']} cannot run farm: "
                           f"{bare_head['python']} (Python "), line
    for needed in ("ray", "mlflow", "guidellm", "click", "pydantic"):
        assert needed in line.split("it lacks ", 1)[1], line
    assert "submitted" not in proc.stdout
    jobs = _jobs(bare_head["address"])
    assert [j for j in jobs if not j.endswith("-check")] == [], "the sweep was never submitted"
    assert any("farm.headcheck" in (entrypoint or "") for entrypoint in jobs.values())
    assert list(tmp_path.iterdir()) == []


def test_the_check_passes_where_the_heads_python_has_farms_dependencies(bare_head, tmp_path):
    """The same head and the same check, with farm's environment first on the job's PATH."""
    from ray.job_submission import JobSubmissionClient

    from farm.run.jobs import check_head, stage

    root = stage(None, tmp_path)
    client = JobSubmissionClient(bare_head["address"])
    check_head(client, bare_head["address"], {"working_dir": str(root), "env_vars": {"PATH": f"{BIN}:/usr/bin:/bin"}},
               "farm-test-check-ok")  # a UserError line where the head's python lacked something
    # The check really ran on the head, with farm's interpreter, and found nothing missing.
    assert str(client.get_job_status("farm-test-check-ok").value) == "SUCCEEDED"
    logs = client.get_job_logs("farm-test-check-ok").splitlines()
    report = json.loads(next(line[len(MARK):] for line in logs if line.startswith(MARK)))
    assert Path(report["python"]) == BIN / "python", report
    assert report["missing"] == [] and report["mismatched"] == [] and not report.get("too_old"), report


def test_a_head_without_any_python_on_its_path_is_named(bare_head, tmp_path):
    from ray.job_submission import JobSubmissionClient

    from farm.errors import UserError
    from farm.run.jobs import check_head, stage

    root = stage(None, tmp_path)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    client = JobSubmissionClient(bare_head["address"])
    with pytest.raises(UserError) as err:
        check_head(client, bare_head["address"], {"working_dir": str(root), "env_vars": {"PATH": f"{empty}:/bin"}},
                   "farm-test-check-no-python")
    if Path("/bin/python").exists():
        pytest.skip("this machine has a /bin/python")
    assert err.value.line() == (f"--address: the head at {bare_head['address']} has no `python` on the PATH Ray runs "
                                f"jobs with ({empty}:/bin): start Ray on the head from farm's environment "
                                "(README: 'Running the real study')")
