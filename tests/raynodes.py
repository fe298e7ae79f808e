"""Real Ray nodes for tests: `ray start --block` processes on loopback, each in its own session.

Every port is chosen free, every node has its own temp dir (short: Unix socket paths are
limited to 107 bytes), and a node is stopped by signalling the process group of the
`ray start --block` process this test started (it takes its node's processes with it): never
`ray stop`, which would stop every Ray on the machine, and never a kill by name.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sweeptools import port_free

BIN = Path(sys.executable).parent

# For `ray.cluster_utils.Cluster` (nodes in this process's session): Ray's single-machine mode,
# every address is 127.0.0.1. `ray start` nodes get `--node-ip-address=127.0.0.1` instead (a
# multi-node `ray start` refuses this mode).
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def set_env(values: dict[str, str]):
    """Set environment variables for a test; returns the function that puts the old ones back."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)

    def restore() -> None:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return restore


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


WORKER_PORTS = 200
# The ports a head's Ray Client proxy gives each driver's server (ray/util/client/server/proxier.py:
# MIN_SPECIFIC_SERVER_PORT, MAX_SPECIFIC_SERVER_PORT); no worker block may hold one of them.
CLIENT_SERVER_PORTS = (23000, 24000)
_worker_ranges: list[int] = []


def worker_port_range() -> int:
    """First port of a free block of WORKER_PORTS + 1 ports below the kernel's ephemeral range.

    The node's other ports are ephemeral ones the kernel just handed out; a block taken from the
    same range could contain one of them (Ray refuses to start: "port ... used by other
    components") or one another process takes before the workers bind it. Below the ephemeral
    range the kernel hands out nothing, and blocks given to earlier nodes here are skipped.
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(50):
        start = rng.randrange(10000, low - WORKER_PORTS - 1)
        if any(abs(start - other) <= WORKER_PORTS for other in _worker_ranges):
            continue
        if start <= CLIENT_SERVER_PORTS[1] and start + WORKER_PORTS >= CLIENT_SERVER_PORTS[0]:
            continue  # a worker holding one of them would take a Ray Client driver's server port
        if all(port_free(port) for port in range(start, start + WORKER_PORTS + 1)):
            _worker_ranges.append(start)
            return start
    raise RuntimeError("no free block of worker ports below the ephemeral range")


def wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


def stop_group(proc: subprocess.Popen, grace: float = 8) -> None:
    """SIGTERM to the group this test started, a grace period, then SIGKILL."""
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
    # The node's own processes (raylet, GCS, workers) share the group: make sure none is left.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@dataclass
class RayNode:
    proc: subprocess.Popen
    temp_dir: Path
    log: Path
    ports: dict[str, int] = field(default_factory=dict)

    def stop(self) -> None:
        stop_group(self.proc)
        self.log_text = self.log.read_text(errors="replace") if self.log.exists() else ""
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def start_node(env: dict[str, str], *, head: bool, gcs_port: int | None = None, num_cpus: int = 2,
               num_gpus: int = 0, resources: str | None = None, log_dir: Path, path: str | None = None) -> RayNode:
    """One Ray node; the head also runs the dashboard (the Jobs API) on a free port. `path`: the
    node's PATH (what a job's `python` is found on); default this interpreter's bin, then env's."""
    names = ["node_manager", "object_manager", "metrics_export", "agent_listen", "agent_grpc", "runtime_env",
             "client_server", "dashboard", "gcs"]
    ports = dict(zip(names, free_ports(len(names))))
    if gcs_port is not None:
        ports["gcs"] = gcs_port
    ports["min_worker"] = worker_port_range()
    temp_dir = Path(tempfile.mkdtemp(prefix="farm-ray-", dir="/tmp"))
    argv = [str(BIN / "ray"), "start", "--block", "--node-ip-address=127.0.0.1", f"--num-cpus={num_cpus}",
            f"--num-gpus={num_gpus}", f"--node-manager-port={ports['node_manager']}",
            f"--object-manager-port={ports['object_manager']}", f"--metrics-export-port={ports['metrics_export']}",
            f"--dashboard-agent-listen-port={ports['agent_listen']}",
            f"--dashboard-agent-grpc-port={ports['agent_grpc']}", f"--runtime-env-agent-port={ports['runtime_env']}",
            # a worker port block of its own per node, apart from every other port (see worker_port_range)
            f"--min-worker-port={ports['min_worker']}", f"--max-worker-port={ports['min_worker'] + WORKER_PORTS}",
            f"--temp-dir={temp_dir}", "--disable-usage-stats", "--object-store-memory=200000000"]
    if resources:
        argv.append(f"--resources={resources}")
    if head:
        argv += ["--head", f"--port={ports['gcs']}", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
                 f"--dashboard-port={ports['dashboard']}", f"--ray-client-server-port={ports['client_server']}"]
    else:
        argv += [f"--address=127.0.0.1:{ports['gcs']}"]
    log = log_dir / f"ray-{'head' if head else 'worker'}-{ports['node_manager']}.log"
    with open(log, "ab") as fh:
        node_path = path if path is not None else f"{BIN}{os.pathsep}{env.get('PATH', '')}"
        # RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0: a test's node has nothing to drain, and with Ray's
        # default (30 s) every stop waited out stop_group's whole grace period before the SIGKILL.
        proc = subprocess.Popen(argv, env={**env, "PATH": node_path, "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"},
                                stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    node = RayNode(proc, temp_dir, log, ports)
    try:
        wait_port(ports["dashboard"] if head else ports["node_manager"], 90)
    except TimeoutError:
        node.stop()
        raise RuntimeError(f"ray start failed: {node.log_text[-3000:]}") from None
    return node
