"""What a trial's actor reads of the node it runs on: a fresh artifacts directory, guidellm's
version, the GPUs' model, the node's IP, Ray id and labels, and the node's guidellm client host."""

from __future__ import annotations

import importlib.metadata
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import ray
from ray.exceptions import RayError

from actors import client_host

if TYPE_CHECKING:
    from actors.trial_job import TrialJob


def _fresh_dir(path: Path) -> Path:
    """`path`, or `path.2`, `path.3`... if a driver that was stopped or killed left one there:
    a resumed sweep runs the trial again from scratch, in a directory of its own."""
    candidate, n = path, 1
    while True:
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            n += 1
            candidate = path.with_name(f"{path.name}.{n}")


def _guidellm_version() -> str | None:
    try:
        return importlib.metadata.version("guidellm")
    except importlib.metadata.PackageNotFoundError:
        return None


def _gpu_name(ids: list[str]) -> str | None:
    """The model of the trial's GPUs as the driver names them ('NVIDIA H200'); None without a driver."""
    cmd = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"] + (["-i", ",".join(ids)] if ids else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = sorted({line.strip() for line in out.stdout.splitlines() if line.strip()})
    return ", ".join(names) if out.returncode == 0 and names else None


def _node_ip() -> str | None:
    try:
        return ray.util.get_node_ip_address()
    except Exception:  # not inside Ray
        return None


def _node_label(name: str) -> str | None:
    """The value of this node's Ray label `name` (`ray start --labels`), where it has one."""
    try:
        return ray.get_runtime_context().get_node_labels().get(name) if ray.is_initialized() else None
    except Exception:  # not inside Ray
        return None


def _node_id() -> str | None:
    try:
        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except Exception:  # not inside Ray
        return None


def _node_client_host(job: TrialJob):
    """This node's guidellm client host as `ClientSession` asks for it (seconds to wait -> its socket,
    or None), or None where the sweep started none or this node has none (a node that joined later)."""
    if not job.client_hosts:
        return None
    try:
        host = ray.get_actor(client_host.host_name(ray.get_runtime_context().get_node_id()), namespace=job.client_hosts)
    except ValueError:
        return None
    ref = host.address.remote()  # answered once the host listens (it imports guidellm first)

    def address(timeout_s: float) -> str | None:
        try:
            return ray.get(ref, timeout=timeout_s)
        except RayError:  # not listening yet (GetTimeoutError), or the host is gone
            return None

    return address
