"""The host and GPU microbenchmark beside a trial's fingerprint (actors/microbench.py), on this
machine: a host figure is always measured; the GPU one, run in an engine's Python, says why it has
no figures where there is no GPU (here), and a machine's figures are measured once per boot."""

from __future__ import annotations

import json
import os
import sys

from actors import microbench


def test_the_host_is_measured_in_plausible_units():
    figures = microbench.host_bench()
    assert set(figures) == {"host_sha256_mib_s", "host_copy_gib_s"}
    # a core hashes tens to thousands of MiB a second; memory copies at a fraction to tens of GiB/s
    assert 10 < figures["host_sha256_mib_s"] < 10_000 and 0.05 < figures["host_copy_gib_s"] < 500


def test_without_a_gpu_the_gpu_part_says_why_and_keeps_nothing(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    figures, why = microbench.gpu_bench(sys.executable, env, "0", tmp_path)
    assert figures is None
    assert why in ("torch sees no CUDA device",) or why.startswith("torch not importable in the engine's environment")
    assert not (tmp_path / "machine-bench").exists() or not list((tmp_path / "machine-bench").iterdir())


def test_an_engine_python_that_fails_is_said_with_its_exit_code(tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'CUDA error: no kernel image' >&2\nexit 3\n")
    broken.chmod(0o755)
    figures, why = microbench.gpu_bench(str(broken), dict(os.environ), "0", None)
    assert figures is None and why == "the GPU microbenchmark failed (exit 3): CUDA error: no kernel image"
    figures, why = microbench.gpu_bench(str(tmp_path / "absent"), dict(os.environ), "0", None)
    assert figures is None and why.startswith("the GPU microbenchmark could not start")


def test_a_machine_is_measured_once_a_boot(tmp_path):
    """The first trial of a sitting measures; later trials on the same boot and GPU read it back (an
    engine Python that would fail shows nothing ran)."""
    ran = tmp_path / "python"
    ran.write_text("#!/bin/sh\necho '{\"gpu_matmul_bf16_tflops\": 612.5, \"gpu_copy_gib_s\": 2810.0}'\n")
    ran.chmod(0o755)
    first, why = microbench.gpu_bench(str(ran), dict(os.environ), "GPU-1234", tmp_path / "cache")
    assert why is None and first == {"gpu_matmul_bf16_tflops": 612.5, "gpu_copy_gib_s": 2810.0}
    ran.write_text("#!/bin/sh\nexit 1\n")
    again, why = microbench.gpu_bench(str(ran), dict(os.environ), "GPU-1234", tmp_path / "cache")
    assert why is None and again == first
    # another GPU of the machine is measured on its own
    other, why = microbench.gpu_bench(str(ran), dict(os.environ), "GPU-5678", tmp_path / "cache")
    assert other is None and why.startswith("the GPU microbenchmark failed (exit 1)")
    (kept,) = (tmp_path / "cache" / "machine-bench").iterdir()
    assert json.loads(kept.read_text()) == first
