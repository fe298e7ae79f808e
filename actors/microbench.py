"""A short host and GPU microbenchmark beside each trial's machine fingerprint (issue 45, "Machines
as blocks"): two lent machines that look the same by name, driver and GPU model can still differ in
speed (the H200 study's same configurations differed by 5 - 30 % between machines), and a fingerprint
alone cannot say so. What is measured, before the engine starts (the GPUs are then free):

- host: single-core SHA-256 over 32 MiB (MiB/s) and a 128 MiB memory copy (GiB/s), in this process,
  about 0.1 s; measured for every trial (it also catches a host busy with other work);
- GPU: a bf16 matrix multiplication of 8192 x 8192 (TFLOPS) and a 1 GiB device-to-device copy
  (GiB/s) on the trial's first GPU, in a child process that imports the engine's torch (the engine's
  environment: farm's own process never holds a CUDA context, which would take GPU memory from the
  engine), about 5-10 s with torch's import. Once per machine boot and GPU: the result is kept in the
  node's farm cache (`machine-bench/`, keyed by the kernel's boot id and the GPU's UUID), so a
  sitting's later trials reuse it.

Where a part cannot run (no GPU, no torch in the engine's environment, a failure or a timeout) the
record says why, never zeros.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

HOST_HASH_MIB = 32
HOST_COPY_MIB = 128
GPU_TIMEOUT_S = 120

# Run in the engine's environment (its PYTHONPATH holds torch); prints one JSON line.
GPU_SCRIPT = r"""
import json, time
try:
    import torch
except Exception as exc:
    print(json.dumps({"why": f"torch not importable in the engine's environment: {type(exc).__name__}: {exc}"}))
    raise SystemExit(0)
if not torch.cuda.is_available():
    print(json.dumps({"why": "torch sees no CUDA device"}))
    raise SystemExit(0)
dev = torch.device("cuda:0")
n = 8192
a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
for _ in range(3):
    a @ b
torch.cuda.synchronize()
iters = 20
t0 = time.perf_counter()
for _ in range(iters):
    a @ b
torch.cuda.synchronize()
dt = time.perf_counter() - t0
tflops = 2 * n ** 3 * iters / dt / 1e12
src = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
dst = torch.empty_like(src)
dst.copy_(src)
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(5):
    dst.copy_(src)
torch.cuda.synchronize()
copy = 2 * 5 * (1 << 30) / (time.perf_counter() - t0) / (1 << 30)  # read + write
print(json.dumps({"gpu_matmul_bf16_tflops": round(tflops, 1), "gpu_copy_gib_s": round(copy, 1),
                  "torch": torch.__version__}))
"""


def host_bench() -> dict[str, float]:
    """Single-core SHA-256 (MiB/s) and a memory copy (GiB/s) of this host, now."""
    data = bytes(HOST_HASH_MIB << 20)  # SHA-256's speed does not depend on the bytes
    t0 = time.perf_counter()
    hashlib.sha256(data).digest()
    sha = HOST_HASH_MIB / (time.perf_counter() - t0)
    block = bytearray(HOST_COPY_MIB << 20)
    t0 = time.perf_counter()
    copied = bytes(block)
    copy = 2 * HOST_COPY_MIB / 1024 / (time.perf_counter() - t0)  # read + write
    del copied, block
    return {"host_sha256_mib_s": round(sha, 1), "host_copy_gib_s": round(copy, 2)}


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def gpu_bench(python: str, env: dict[str, str], gpu: str | None, cache_dir: Path | None,
              timeout_s: float = GPU_TIMEOUT_S) -> tuple[dict[str, float] | None, str | None]:
    """The GPU microbenchmark on the first GPU `env` makes visible, run by `python` in `env` (the
    engine's); (figures, None), or (None, why not). Kept per boot and GPU (`gpu`: its index or UUID as
    CUDA_VISIBLE_DEVICES names it) under `cache_dir`."""
    boot = _boot_id()
    cached = None
    if cache_dir is not None and boot and gpu:
        cached = cache_dir / "machine-bench" / f"{hashlib.sha256(f'{boot}/{gpu}'.encode()).hexdigest()[:16]}.json"
        try:
            kept = json.loads(cached.read_text())
            if isinstance(kept, dict) and "gpu_matmul_bf16_tflops" in kept:
                return {k: float(v) for k, v in kept.items() if k.startswith("gpu_")}, None
        except (OSError, ValueError):
            pass
    try:
        out = subprocess.run([python, "-c", GPU_SCRIPT], env=env, capture_output=True, text=True,
                             timeout=timeout_s, start_new_session=True)
    except subprocess.TimeoutExpired:
        return None, f"the GPU microbenchmark took over {timeout_s:g} s"
    except OSError as exc:
        return None, f"the GPU microbenchmark could not start {python}: {exc}"
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return None, f"the GPU microbenchmark failed (exit {out.returncode}): {tail}"
    figures = json.loads(lines[-1])
    if "why" in figures:
        return None, str(figures["why"])
    result = {k: float(v) for k, v in figures.items() if k.startswith("gpu_")}
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(json.dumps(result))
        except OSError:
            pass
    return result, None
