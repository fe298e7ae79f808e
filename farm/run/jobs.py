"""`farm sweep --address http://HEAD:8265`: the sweep as a Ray job, submitted through the Jobs API.

The project (farm's code and configs, without virtual environments, engines, models and local
results) and the study (a file of the project as it is, any other with its includes merged)
travel in the job's runtime environment; datasets and models do not,
they live on the nodes at the paths the study names. The job's entrypoint is the same
`farm sweep` on the head node (`--address auto` there), so what runs on the cluster is exactly
what runs on a laptop. This side prints the job id and the dashboard link, follows the job's
log until it ends (unless `--no-wait`), and exits with the job's outcome.

Token authentication (on by default for clusters started by Ray 2.60's `ray.init`, and for
`ray start` wherever a token exists): Ray's SDK sends the cluster token only when this process
runs in token mode. `enable_client_token` turns token mode on when a token is available
(`RAY_AUTH_TOKEN`, `RAY_AUTH_TOKEN_PATH` or `~/.ray/auth_token`), as `ray.init` does for a local
cluster. The token goes into the request header only: never into the job's runtime
environment, its entrypoint, logs or MLflow.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import logging
import os
import shlex
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import yaml

from farm.errors import ClusterError, UserError
from farm.headcheck import MARK
from farm.inputs import RAY_TOKEN_HOW, check_ray_token_sources, env_tracking_uri, ray_token_source
from farm.store import schema
from farm.study.load import DEFAULT_CONFIG, _read_yaml

PROJECT = Path(__file__).resolve().parents[2]
# Never uploaded: environments, engines, models and offline bundles are installed on every node; results and
# local tracking stores stay where they were written, measured data (bench/: the H200's 10 MB store, its
# logs and plots) and the docs too: a sweep on the head runs farm's code and a study, nothing else (every
# job uploaded ~18 MB, and Ray's warning about the store was a second line under farm's one-line errors).
EXCLUDES = (".venv", "venv", ".engines", ".models", ".bundles", ".h200", "mlflow.db", "mlruns", "mlartifacts", "farm-runs", ".git",
            "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis", "build", "dist", "*.pyc", "bench", "docs")
# Ray's SDK logs each file it leaves out and each upload at INFO: noise around farm's own lines.
QUIET_LOGGERS = ("ray._private.runtime_env.packaging", "ray.dashboard.modules.dashboard_sdk")
JOB_STUDY = ".farm-job/study.yaml"
SUBMISSION_ENV = "FARM_SUBMISSION_ID"
# Job statuses (ray.job_submission.JobStatus values) and the exit codes they end with.
EXIT_CODES = {"SUCCEEDED": 0, "FAILED": 1, "STOPPED": 130}
KEY = "--address"


def is_jobs_address(address: str | None) -> bool:
    """`http(s)://HEAD:8265` is the Jobs API; `auto`, `HOST:PORT` and `ray://` run the driver here."""
    return bool(address) and urlparse(address).scheme in ("http", "https")


def is_client_address(address: str | None) -> bool:
    """`ray://HEAD:10001`: Ray Client; the driver runs here, its actors on the cluster."""
    return bool(address) and urlparse(address).scheme == "ray"


def client_runtime_env(dest: Path) -> dict:
    """Ray Client mode: the cluster runs this machine's farm (the project travels as the job's
    working directory, as with the Jobs API), not whatever version its nodes have installed."""
    return {"working_dir": str(stage(None, dest))}


# The head's Ray Client proxy starts one server process per driver (ray_client_server_PORT, ports
# 23000-23999). On a loaded head that start can fail once ("Starting Ray client server failed")
# and succeed on the next connection; Ray's own connection retries do not cover it.
CLIENT_SERVER_FAILED = "Starting Ray client server failed"
CLIENT_CONNECT_WAITS = (2.0, 5.0)  # seconds before the 2nd and 3rd attempt


def connect_client(connect, address: str, *, waits: tuple[float, ...] = CLIENT_CONNECT_WAITS, sleep=time.sleep,
                   warn=lambda line: print(line, file=sys.stderr, flush=True)):
    """`connect()` (ray.init on a `ray://` address), again after a wait when the head's proxy
    could not start this driver's server; any other failure is raised as it is. After the last
    attempt: one line naming the address and where the head logged why."""
    attempts = len(waits) + 1
    for attempt in range(1, attempts + 1):
        try:
            return connect()
        except ConnectionError as exc:
            if CLIENT_SERVER_FAILED not in str(exc):
                raise
            if attempt == attempts:
                raise ClusterError(f"the head at {address} could not start a Ray Client server for this driver "
                                   f"({attempts} attempts); the head's session logs say why "
                                   "(ray_client_server_*.err under its temp dir, e.g. /tmp/ray/session_latest/logs)",
                                   key="--address") from None
            warn(f"warning: --address: the head at {address} could not start a Ray Client server for this driver "
                 f"(attempt {attempt} of {attempts}); trying again in {waits[attempt - 1]:.0f} s")
            sleep(waits[attempt - 1])
    raise AssertionError("unreachable")


def dashboard_url(address: str) -> str:
    return address.rstrip("/")


def job_link(address: str, job_id: str) -> str:
    return f"{dashboard_url(address)}/#/jobs/{job_id}"


# -- the cluster token ------------------------------------------------------------------


def enable_client_token(key: str = KEY) -> bool:
    """Token mode for this process when a token is available (what `ray.init` does for a
    local cluster); returns whether requests will carry a token. `RAY_AUTH_MODE`, when set,
    is respected as it is. `key`: where the address came from (`--address` or `RAY_ADDRESS`)."""
    check_ray_token_sources(key)  # a token Ray could not send is one line here, not a traceback later
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is not None:
        if mode.lower() == "token" and ray_token_source() is None:
            # Ray's token loader aborts the whole process (a C++ check) when token mode has no token
            raise UserError(f"is 'token', but this machine has no cluster token: {RAY_TOKEN_HOW}", key="RAY_AUTH_MODE")
        return mode.lower() == "token"
    from ray._raylet import AuthenticationTokenLoader, Config  # ray (seconds): only with a cluster address

    if not AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True):
        return False
    os.environ["RAY_AUTH_MODE"] = "token"
    Config.initialize("")  # Ray's own way to make this process see the new mode
    return True


def token_hint() -> str | None:
    """How to open Ray's dashboard when token authentication is on (Ray 2.59+ turns it on for the
    cluster `ray.init` starts): where this machine's token is and the command that prints it. The
    token itself is never shown. None when the cluster takes no token."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        return None
    # Ray's order: RAY_AUTH_TOKEN, then the file RAY_AUTH_TOKEN_PATH names, then ~/.ray/auth_token.
    if os.environ.get("RAY_AUTH_TOKEN"):
        where = "$RAY_AUTH_TOKEN of this shell"
    elif os.environ.get("RAY_AUTH_TOKEN_PATH"):
        where = os.environ["RAY_AUTH_TOKEN_PATH"]
    else:
        where = "~/.ray/auth_token"
    return f"it asks for the cluster's token: `ray get-auth-token` prints it (from {where})"


def dashboard_link(url: str | None) -> str | None:
    """`ray.init`'s dashboard address as a link (Ray gives it without a scheme)."""
    if not url:
        return None
    return url if "://" in url else f"http://{url}"


def dashboard_line(link: str, *, local: bool, hint: str | None = None) -> str:
    """The line that gives Ray's dashboard: a Ray that this sweep started (`local`) ends with the
    sweep, and its dashboard with it; a cluster's stays up."""
    notes = (["open it while the sweep runs: it closes with the sweep"] if local else []) + ([hint] if hint else [])
    return f"Ray dashboard: {link}" + (f"  ({'; '.join(notes)})" if notes else "")


# The end of a sweep that started its own Ray: the dashboard link printed at its start is dead now.
DASHBOARD_CLOSED = "the Ray dashboard closed with the sweep's Ray; the results stay in MLflow (above)"


def _auth_error(address: str, exc: Exception, token_sent: bool, key: str = KEY) -> UserError:
    text = str(exc)
    if "Authentication required" in text or not token_sent:
        return UserError(f"the Ray cluster at {address} requires its token and this machine has none: set "
                         f"RAY_AUTH_TOKEN or put the token in ~/.ray/auth_token (README: 'The cluster token')", key=key)
    return UserError(f"the Ray cluster at {address} rejected the token (RAY_AUTH_TOKEN or ~/.ray/auth_token "
                     f"is not this cluster's; README: 'The cluster token')", key=key)


def connect(address: str, key: str = KEY):
    """A JobSubmissionClient for `address`, or one `UserError` line saying why not (`key`: where
    the address came from)."""
    from ray.exceptions import AuthenticationError  # ray (seconds): only with a cluster address
    from ray.job_submission import JobSubmissionClient

    token_sent = enable_client_token(key)
    try:
        return JobSubmissionClient(dashboard_url(address))
    except AuthenticationError as exc:
        raise _auth_error(address, exc, token_sent, key) from None
    except ConnectionError:
        raise UserError(f"cannot reach the Ray dashboard at {address} (is the cluster up, and is this its "
                        f"dashboard port?)", key=key) from None
    except RuntimeError as exc:  # the SDK's own errors (an old Ray, a 404 where the API should be)
        raise UserError(f"{address} is not a Ray Jobs API: {str(exc).splitlines()[0][:200]}", key=key) from None


# -- what travels with the job ----------------------------------------------------------


def stage(study_data: dict | None, dest: Path) -> Path:
    """A copy of the project, with the study (includes merged) at `JOB_STUDY` when it comes from
    outside the project (`None`: the study is one of the project's files); returns its root."""
    root = dest / "farm"
    shutil.copytree(PROJECT, root, ignore=shutil.ignore_patterns(*EXCLUDES), symlinks=True)
    if study_data is None:
        return root
    study_file = root / JOB_STUDY
    study_file.parent.mkdir(parents=True, exist_ok=True)
    study_file.write_text("# The study as submitted (includes merged); farm sweep --address http://...\n"
                          + yaml.safe_dump(study_data, sort_keys=False))
    return root


@dataclass
class SweepArgs:
    """The `farm sweep` options that the job's entrypoint repeats on the head."""

    grid: str
    tracking_uri: str
    config: str = JOB_STUDY  # relative to the project's root on the head
    experiment: str | None = None
    resume: str | None = None
    repeats: int | str | None = None
    run_budget: int | None = None
    workdir: str | None = None
    strategy: str | None = None
    budget: float | None = None
    accelerator: str | None = None
    prices: tuple[tuple[str, float], ...] = ()  # --price, each given again

    def entrypoint(self) -> str:
        argv = ["python", "-m", "farm.cli", "sweep", "--config", self.config, "--grid", self.grid,
                "--address", "auto", "--tracking-uri", self.tracking_uri]
        for flag, value in (("--experiment", self.experiment), ("--resume", self.resume),
                            ("--repeats", self.repeats), ("--run-budget", self.run_budget),
                            ("--workdir", self.workdir), ("--strategy", self.strategy), ("--budget", self.budget),
                            ("--accelerator", self.accelerator)):
            if value is not None:
                argv += [flag, str(value)]
        for accelerator, price in self.prices:
            argv += ["--price", f"{accelerator}={price!r}"]
        return shlex.join(argv)


def check_tracking_for_cluster(uri: str | None) -> str:
    """A cluster sweep logs from every node: it needs a tracking server they all reach (given, or
    in MLFLOW_TRACKING_URI)."""
    uri = uri or env_tracking_uri()
    if not uri:
        raise UserError("a sweep on a cluster needs an MLflow server every node can reach: pass "
                        "--tracking-uri http://HOST:5000 (start one with `farm server`)", key="--tracking-uri")
    if uri.startswith(("sqlite:", "file:")) or "://" not in uri:
        raise UserError(f"'{uri}' is a store on this machine, which the cluster's nodes cannot write: pass "
                        "--tracking-uri http://HOST:5000 (start one with `farm server`)", key="--tracking-uri")
    return uri


# -- submit and follow ------------------------------------------------------------------


def submit_sweep(address: str, study_data: dict | None, args: SweepArgs, *, study_name: str = "", wait: bool = True,
                 out=None, key: str = KEY) -> int:
    """Submit; follow the log unless `wait` is false. Returns the exit code for `farm sweep`.
    `key`: where the address came from (`--address` or `RAY_ADDRESS`), as its errors name it."""
    out = out or sys.stdout
    client = connect(address, key)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    submission_id = f"farm-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory(prefix="farm-job-") as tmp:
        root = stage(study_data, Path(tmp))
        runtime_env = {"working_dir": str(root), "env_vars": {SUBMISSION_ENV: submission_id}}
        check_head(client, address, runtime_env, f"{submission_id}-check", key=key)
        job_id = client.submit_job(entrypoint=args.entrypoint(), submission_id=submission_id, runtime_env=runtime_env,
                                   metadata={schema.GRID_TAG: args.grid, schema.STUDY_TAG: study_name,
                                             schema.TRACKING_URI_JOB_KEY: args.tracking_uri})
    print(f"submitted job {job_id}: farm sweep --grid {args.grid} on {dashboard_url(address)}", file=out)
    print(f"dashboard: {job_link(address, job_id)}", file=out)
    if not wait:
        print(f"detached; follow it with `ray job logs --follow {job_id} --address {dashboard_url(address)}`, "
              f"or `farm status --tracking-uri {args.tracking_uri}`", file=out)
        return 0
    return follow(client, address, job_id, args, out=out)


# The sweep's entrypoint runs `python` from the PATH Ray has on the head. Before submitting it,
# a job of a second or two runs farm/headcheck.py with that same `python` in the same runtime
# environment (the upload is content-addressed: the sweep's job reuses it), so a head that
# cannot run farm is one line here, not a ModuleNotFoundError at the end of a job's log.
HEAD_CHECK = ("command -v python >/dev/null 2>&1 || { echo \"FARM_HEAD_CHECK_NO_PYTHON PATH=$PATH\"; exit 0; }; "
              "python -m farm.headcheck")
HEAD_CHECK_TIMEOUT_S = 180.0


def check_head(client, address: str, runtime_env: dict, check_id: str, *,
               timeout_s: float = HEAD_CHECK_TIMEOUT_S, key: str = KEY) -> None:
    """Raise one `UserError` line when the head's `python` lacks farm's dependencies."""
    # Stays listed in the dashboard as `<submission id>-check` (deleting it races with Ray's own
    # bookkeeping of a job that just ended, which writes a bare entry back).
    job = client.submit_job(entrypoint=HEAD_CHECK, submission_id=check_id, runtime_env=runtime_env,
                            metadata={schema.KIND_TAG: schema.JOB_KIND_HEAD_CHECK})
    deadline = time.monotonic() + timeout_s
    while (status := str(client.get_job_status(job).value)) not in EXIT_CODES:
        if time.monotonic() > deadline:
            client.stop_job(job)
            raise UserError(f"the head at {address} did not run farm's check job within {timeout_s:.0f} s "
                            f"(job {job}, status {status}): is its runtime environment still installing?", key=key)
        time.sleep(0.5)
    _judge_head(address, status, client.get_job_logs(job), MARK, key)


def _judge_head(address: str, status: str, logs: str, mark: str, key: str = KEY) -> None:
    lines = logs.splitlines()
    no_python = next((line for line in lines if line.startswith("FARM_HEAD_CHECK_NO_PYTHON")), None)
    if no_python is not None:
        path = no_python.split("PATH=", 1)[-1]
        raise UserError(f"the head at {address} has no `python` on the PATH Ray runs jobs with ({path}): start Ray "
                        "on the head from farm's environment (README: 'Running the real study')", key=key)
    found = next((line[len(mark):] for line in lines if line.startswith(mark)), None)
    if found is None:
        tail = next((line for line in reversed(lines) if line.strip()), f"job {status.lower()}, no output")
        raise UserError(f"the head's `python` at {address} cannot run farm's check: {tail.strip()[:300]}", key=key)
    report = json.loads(found)
    python = f"{report['python']} (Python {report['version']}, the first `python` on the PATH of Ray on the head)"
    problems = []
    if report.get("too_old"):
        problems.append(f"farm needs Python >= {report['too_old']}")
    if report["missing"]:
        problems.append("it lacks " + ", ".join(report["missing"]))
    if report["mismatched"]:
        problems.append("it has " + ", ".join(report["mismatched"]))
    if problems:
        raise UserError(f"the head at {address} cannot run farm: {python}: {'; '.join(problems)}. Install farm "
                        "there (pip install -e .) or start Ray on the head from farm's environment "
                        "(README: 'Running the real study')", key=key)


def follow(client, address: str, job_id: str, args: SweepArgs, *, out=None) -> int:
    """Stream the job's log until it ends; the job's status decides the exit code."""
    out = out or sys.stdout

    async def tail() -> None:
        async for chunk in client.tail_job_logs(job_id):
            out.write(chunk)
            out.flush()

    try:
        try:
            asyncio.run(tail())
        except Exception as exc:  # the log stream broke (network, dashboard restart): the job goes on
            print(f"\n(log stream lost: {type(exc).__name__}; waiting for job {job_id} to end, Ctrl-C detaches)",
                  file=out)
        status = _wait_terminal(client, job_id)
    except KeyboardInterrupt:
        print(f"\ndetached: job {job_id} keeps running on the cluster; stop it with "
              f"`ray job stop {job_id} --address {dashboard_url(address)}`", file=out)
        return 130
    info = client.get_job_info(job_id)
    code = EXIT_CODES.get(status, 1)
    driver_code = getattr(info, "driver_exit_code", None)
    if status == "FAILED" and driver_code:
        code = driver_code
    message = f"job {job_id} {status.lower()}"
    if status != "SUCCEEDED" and info.message:
        message += f": {info.message.strip().splitlines()[-1][:300]}"
    print(message, file=out)
    sweep_id = _sweep_of_job(args.tracking_uri, job_id)
    if sweep_id:
        print(f"sweep id: {sweep_id}; farm status {sweep_id} --tracking-uri {args.tracking_uri}", file=out)
    return code


def _wait_terminal(client, job_id: str, poll_s: float = 2.0) -> str:
    """The job's final status (the log stream ends a moment before the status says so)."""
    while True:
        status = str(client.get_job_status(job_id).value)
        if status in EXIT_CODES:
            return status
        time.sleep(poll_s)


def _sweep_of_job(uri: str, job_id: str) -> str | None:
    """The sweep the job started (its parent run carries the submission id), if MLflow answers here."""
    try:
        from farm.store import tracking  # mlflow (a second of imports) only once the job has ended

        return tracking.sweep_of_submission(uri, job_id)
    except Exception:  # the tracking server may be reachable from the nodes only
        return None


def tag_sweep_with_submission(uri: str, sweep_id: str, link: str | None = None) -> None:
    """Inside a submitted job: mark the sweep's parent run with the job's submission id, and the
    job's metadata with the sweep (its id and MLflow link), so the dashboard's job page names it."""
    submission_id = os.environ.get(SUBMISSION_ENV)
    if submission_id:
        from farm.store import tracking  # mlflow: only inside a submitted job

        tracking.tag_submission(uri, sweep_id, submission_id)
        add_job_metadata(submission_id, {schema.SWEEP_TAG: sweep_id, **({schema.MLFLOW_RUN_JOB_KEY: link} if link else {})})


# Where Ray keeps a submitted job's record (ray/dashboard/modules/job/common.py, JobInfoStorageClient):
# its internal KV, namespace "job", key `_ray_internal_job_info_<submission id>`, JSON of JobInfo.
JOB_INFO_NAMESPACE = "job"
JOB_INFO_KEY = "_ray_internal_job_info_{submission_id}"


def add_job_metadata(submission_id: str, values: dict[str, str]) -> bool:
    """Add `values` to a running job's metadata (what `ray job list` and the dashboard's job page
    show). Ray's Jobs API sets metadata only at submission, before the sweep has an id, so this
    updates the job's record in place, as Ray's job supervisor does for its status (which reads
    the record before each write, so these keys stay). Returns whether it did; where it cannot
    (a Ray whose record looks otherwise), one warning line on stderr says why and the job runs on:
    the link is also in the job's log."""
    import ray
    from ray.experimental import internal_kv

    key = JOB_INFO_KEY.format(submission_id=submission_id).encode()
    try:
        if not ray.is_initialized():
            why = "this process is not connected to Ray"
        else:
            raw = internal_kv._internal_kv_get(key, namespace=JOB_INFO_NAMESPACE)
            info = json.loads(raw) if raw else None
            if info is None:
                why = f"Ray keeps no record of job {submission_id} (key {key.decode()} in namespace {JOB_INFO_NAMESPACE!r})"
            elif not isinstance(info, dict) or not isinstance(info.get("metadata", {}), dict):
                why = f"Ray's record of job {submission_id} is not laid out as farm knows it"
            else:
                info["metadata"] = {**(info.get("metadata") or {}), **values}
                internal_kv._internal_kv_put(key, json.dumps(info).encode(), overwrite=True,
                                             namespace=JOB_INFO_NAMESPACE)
                return True
    except Exception as exc:  # a private layout that changed: the job runs on without the metadata
        why = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"
    print(f"warning: job {submission_id}'s metadata does not name the sweep ({why}); its log does", file=sys.stderr,
          flush=True)
    return False


def _shipped(path: Path) -> bool:
    """Whether `path` is one of the project's files that `stage` copies."""
    if not path.is_relative_to(PROJECT):
        return False
    parts = path.relative_to(PROJECT).parts
    return not any(fnmatch.fnmatch(part, pattern) for part in parts for pattern in EXCLUDES)


def submit_from_cli(config: str | None, address: str, *, grid: str, tracking_uri: str | None,
                    experiment: str | None, resume: str | None, repeats: int | str | None,
                    run_budget: int | None, workdir: str | None, wait: bool, strategy: str | None = None,
                    budget: float | None = None, accelerator: str | None = None,
                    prices: tuple[tuple[str, float], ...] = (), key: str = KEY) -> int:
    """`farm sweep --address http://...`: the study and the options go to the head.

    A study inside the project travels as the project's own file (its includes and `./` paths
    resolve as they do here); one from elsewhere travels with its includes merged, at `JOB_STUDY`."""
    source = (Path(config) if config else DEFAULT_CONFIG).resolve()
    data = _read_yaml(source, {source})
    uri = check_tracking_for_cluster(tracking_uri)
    inside = _shipped(source)
    args = SweepArgs(grid=grid, tracking_uri=uri, config=str(source.relative_to(PROJECT)) if inside else JOB_STUDY,
                     experiment=experiment, resume=resume, repeats=repeats, run_budget=run_budget,
                     strategy=strategy, budget=budget, accelerator=accelerator,
                     workdir=workdir, prices=tuple(prices))
    return submit_sweep(address, None if inside else data, args, study_name=str(data.get("name", "")), wait=wait,
                        key=key)
