"""Shared test setup: real parts (Ray, MLflow, guidellm, engine processes), kept small for 2 cores."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SEED_FILE = FIXTURES / "seed-results.json"  # a copy of shared/reference/seed-results.json
# The project's shared folder sits beside the repository (../shared): the reference files that
# tests/fixtures holds copies of.
SHARED = REPO.parent / "shared"

# guidellm spawns 10 workers per client by default; 2 are enough for the tests' request rates.
os.environ.setdefault("GUIDELLM__MAX_WORKER_PROCESSES", "2")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

# The Ctrl-C tests (resume, halving) send SIGINT to a `farm sweep` they started. A test run started
# in the background of a non-interactive shell (`bash .ci/run &`) inherits SIGINT ignored, every
# child with it, and Python then never raises KeyboardInterrupt: give the children the default back.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True).returncode == 0


def pytest_collection_modifyitems(config, items):
    _group_simulated_cluster_tests(items)
    for name in MODULE_GROUPED_CLUSTERS:
        _group_modules_using(name, items)
    _LAST_USER.clear()
    for item in items:
        for name in SHARED_CLUSTERS:
            if name in getattr(item, "fixturenames", ()):
                _LAST_USER[name] = item.nodeid
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _group_simulated_cluster_tests(items) -> None:
    """The tests of the session's one simulated cluster (`sim_cluster`) run one after another, where
    the first of them was collected, and those that take a node away (marked `destroys_sim_cluster`)
    after all the others."""
    users = [item for item in items if "sim_cluster" in getattr(item, "fixturenames", ())]
    if not users:
        return
    at = items.index(users[0])
    ordered = ([i for i in users if i.get_closest_marker("destroys_sim_cluster") is None]
               + [i for i in users if i.get_closest_marker("destroys_sim_cluster") is not None])
    rest = [item for item in items if item not in set(users)]
    items[:] = rest[:at] + ordered + rest[at:]


# The session's Ray clusters shared by several test modules. An idle Ray is not free on 2 cores
# (measured here: a head with its dashboard about 3.4 CPU-s a 40 s, the simulated cluster 1.9):
# each one's tests run together, and it stops after the last of them, not at the session's end.
SHARED_CLUSTERS = ("sim_cluster", "token_head", "ray_head")
# grouped by whole modules, so that a module's own sweep (a module-scoped fixture) runs once
MODULE_GROUPED_CLUSTERS = ("token_head", "ray_head")
_LAST_USER: dict[str, str] = {}


def _group_modules_using(name: str, items) -> None:
    """The modules with a test that uses the session fixture `name` run one after another, where the
    first of them was collected, each module's tests in their own order."""
    users = {item.path for item in items if name in getattr(item, "fixturenames", ())}
    if not users:
        return
    moved = [item for item in items if item.path in users]
    at = next(i for i, item in enumerate(items) if item.path in users)
    rest = [item for item in items if item.path not in users]
    items[:] = rest[:at] + moved + rest[at:]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """A shared cluster stops once the last test that uses it is torn down (under xdist a worker's
    last user may not be the collection's: that cluster stops at the session's end, as before)."""
    yield
    for name in SHARED_CLUSTERS:
        if _LAST_USER.get(name) == item.nodeid:
            for fixturedef in item._fixtureinfo.name2fixturedefs.get(name, ()):
                fixturedef.finish(item._request)  # its dependants first (pytest's own finalizers)


def shared_file(relative: str) -> Path:
    """A file of ../shared (beside the repository). Where it is missing the test skips on a
    developer's machine and fails in CI (`CI` set), where ../shared must be checked out."""
    path = SHARED / relative
    if not path.exists():
        why = f"{path} is missing (../shared beside the repository)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return path


# The lent H100's local search from the seed's command (bench/h100/from-seed/): its sweep and store.
H100_SEARCH = "315bba48402047149c6cf8f80855632e"


def h100_search_store(tmp: Path) -> str:
    """The H100 search's committed MLflow store unpacked into `tmp`; its tracking URI."""
    import tarfile

    with tarfile.open(REPO / "bench/h100/from-seed/store.tgz") as tar:
        tar.extractall(tmp, filter="data")
    return f"sqlite:///{tmp / 'mlflow.db'}"


def run_farm(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """The `farm` command as a user runs it, from this interpreter's environment."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "farm.cli", *args], cwd=cwd or REPO, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def farm_cli():
    return run_farm


@pytest.fixture(scope="session")
def study():
    """The default study (configs/qwen3.5-35b-a3b-h200.yaml)."""
    from farm.study.load import load_study

    return load_study()


@pytest.fixture(scope="session")
def seed_data() -> dict:
    import json

    return json.loads(SEED_FILE.read_text())


# -- one smoke sweep for every test that only reads its outcome --------------------------------


@pytest.fixture(scope="session")
def smoke_sweep(tmp_path_factory) -> dict:
    """`farm sweep --grid smoke --json` once per test session (local Ray, real guidellm, real
    mock-server engines, a temporary SQLite MLflow): the tests of its answer, its store, its report
    and its MLflow pages read this one sweep. Tests that change a sweep run their own."""
    import json

    import time

    from sweeptools import client_hosts

    tmp = tmp_path_factory.mktemp("smoke")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    args = [sys.executable, "-m", "farm.cli", "sweep", "--grid", "smoke", "--json", "--tracking-uri", uri,
            "--workdir", str(tmp / "runs")]
    # A mark in the sweep's environment (farm ignores it; Ray's processes and theirs inherit it) tells
    # this sweep's client hosts from those of any other sweep on the machine (another test's, a
    # developer's): the hosts seen while it runs are the ones that must end with it.
    mark, hosts = f"FARM_TEST_SMOKE_SWEEP={tmp}", set()
    out, err = tmp / "sweep.out", tmp / "sweep.err"
    with open(out, "w") as o, open(err, "w") as e:
        sweep = subprocess.Popen(args, cwd=tmp, stdout=o, stderr=e, stdin=subprocess.DEVNULL,
                                 env={**os.environ, "FARM_TEST_SMOKE_SWEEP": str(tmp)})
        deadline = time.monotonic() + 900
        while sweep.poll() is None and time.monotonic() < deadline:
            hosts.update(client_hosts(mark))
            time.sleep(0.5)
        if sweep.poll() is None:
            sweep.kill()
        sweep.wait()
    proc = subprocess.CompletedProcess(args, sweep.returncode, out.read_text(), err.read_text())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"proc": proc, "uri": uri, "tmp": tmp, "summary": json.loads(proc.stdout), "mark": mark,
            "client_hosts": sorted(hosts)}


def resume_smoke(smoke: dict, *extra: str) -> subprocess.CompletedProcess:
    """The finished smoke sweep resumed (`--resume ID`): nothing is left to run, so farm answers
    from the store without starting Ray, in the mode `extra` asks for."""
    proc = run_farm("sweep", "--grid", "smoke", "--tracking-uri", smoke["uri"], "--workdir", str(smoke["tmp"] / "runs"),
                    "--resume", smoke["summary"]["sweep_id"], *extra, cwd=smoke["tmp"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="session")
def smoke_resumed(smoke_sweep) -> subprocess.CompletedProcess:
    """The smoke sweep's end as a person reads it (the normal mode), from its resume."""
    return resume_smoke(smoke_sweep)


# -- one Ray for the local sweeps whose subject is not Ray's own start ----------------------------


@pytest.fixture(scope="session")
def ray_head(tmp_path_factory) -> str:
    """`ray start --head` on this machine (this process's environment without RAY_*, no GPU, at
    least 2 CPUs: what `farm sweep` starts for itself here), shared by the sweeps that join it with
    `--address` (returned: 127.0.0.1:PORT) instead of starting and stopping a Ray each. Ray's own
    start and its end with the driver stay under test in the sweeps that start their own (smoke,
    failures, resume, halving, secrets, the auth server). Stopped through its process group."""
    from raynodes import start_node

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    node = start_node({**env, "RAY_USAGE_STATS_ENABLED": "0"}, head=True, num_cpus=max(os.cpu_count() or 2, 2),
                      log_dir=tmp_path_factory.mktemp("ray-head"))
    try:
        yield f"127.0.0.1:{node.ports['gcs']}"
    finally:
        node.stop()


# -- one Ray head with token authentication, for the tests of the cluster token --------------


@pytest.fixture(scope="session")
def token_head(tmp_path_factory) -> dict:
    """`ray start --head` with token authentication (RAY_AUTH_MODE=token, its token in
    RAY_AUTH_TOKEN), in a HOME of its own, on loopback and free ports: shared by the Jobs API tests
    (which add a second node to it) and the refusals of a machine without its token. Stopped
    through its process group (never `ray stop`). Returns its token, addresses and node."""
    import secrets

    from raynodes import start_node
    from sweeptools import isolated_env

    tmp = tmp_path_factory.mktemp("token-head")
    (tmp / "home").mkdir()
    token = secrets.token_hex(16)
    env = {**isolated_env(tmp / "home"), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    node = start_node(env, head=True, num_cpus=1, log_dir=tmp)
    try:
        yield {"token": token, "env": env, "tmp": tmp, "node": node, "gcs": f"127.0.0.1:{node.ports['gcs']}",
               "jobs": f"http://127.0.0.1:{node.ports['dashboard']}",
               "client": f"ray://127.0.0.1:{node.ports['client_server']}"}
    finally:
        node.stop()


# -- one simulated cluster for the tests of placement, node controls and lost nodes ------------


class SimCluster:
    """A `ray.cluster_utils.Cluster` in this process: a head that takes no trials (0 CPUs) and two
    worker nodes of 2 CPUs and one declared H200 GPU each, each with a farm cache of its own
    (FARM_CACHE_DIR: its own compile caches). Each test module connects with `connect()` and
    disconnects with `ray.shutdown()`; a test that removes a node runs last (`destroys_sim_cluster`)."""

    def __init__(self, tmp: Path):
        from ray.cluster_utils import Cluster

        from raynodes import LOOPBACK_ENV, set_env

        self.tmp = tmp
        self._restore_env = set_env(LOOPBACK_ENV)
        self.cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "num_gpus": 0,
                                                                     "include_dashboard": False})
        self.workers = [self.cluster.add_node(num_cpus=2, num_gpus=1, resources={"accelerator_type:H200": 1},
                                              env_vars={"FARM_CACHE_DIR": str(tmp / f"cache-{n}")})
                        for n in range(2)]
        self.cluster.wait_for_nodes()
        self.address = self.cluster.address

    def connect(self) -> None:
        import ray

        ray.init(address=self.address, log_to_driver=False)

    def shutdown(self) -> None:
        import ray

        if self.cluster is None:
            return
        try:
            ray.shutdown()
            self.cluster.shutdown()
        finally:
            self.cluster = None
            self._restore_env()


@pytest.fixture(scope="session")
def sim_cluster(tmp_path_factory):
    sim = SimCluster(tmp_path_factory.mktemp("sim-cluster"))
    try:
        yield sim
    finally:
        sim.shutdown()
