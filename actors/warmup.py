"""Model warm-up: download a trial's model once per node before its first engine starts there,
so that no trial times a download (the engine's own `warmup_command`, e.g. a Hugging Face
snapshot into the study's download dir). A failed warm-up is not a trial failure: the engine
then fails (or downloads) by itself, and the reason is kept with the trial."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from farm.engines.base import Engine
from farm.study.spec import EngineSpec


def warm(engine: Engine, spec: EngineSpec, model: str, env: dict[str, str], marker_dir: Path,
         timeout_s: float) -> str | None:
    """Run the engine's warm-up for `model` unless this node already did; returns what went wrong, if anything."""
    cmd = engine.warmup_command(spec, model)
    if not cmd:
        return None
    key = hashlib.sha1(f"{engine.name}|{model}|{spec.download_dir}".encode()).hexdigest()[:16]
    marker = Path(marker_dir) / f"{key}.done"
    if marker.is_file():
        return None
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"model warm-up failed: {type(exc).__name__}: {exc}"
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or out.stdout.strip().splitlines() or [""])[-1][:300]
        return f"model warm-up exited with {out.returncode}: {last}"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(model + "\n")
    return None
