"""The pure layer never imports ray or mlflow (checked in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys

PURE = ["farm.study.spec", "farm.study.grid", "farm.study.trial", "farm.analysis.results", "farm.analysis.outcome",
        "farm.engines", "farm.engines.vllm",
        "farm.engines.sglang", "farm.engines.mock", "farm.secrets", "actors.bench_client", "actors.datasets", "farm.inputs"]


def test_pure_modules_import_neither_ray_nor_mlflow():
    code = ("import sys\n" + "".join(f"import {m}\n" for m in PURE) +
            "bad = [m for m in ('ray', 'mlflow') if m in sys.modules]\nprint(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
