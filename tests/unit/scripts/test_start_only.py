"""`scripts/h200/start-only.py`: one trial's engine started as farm's actor starts it, on the compile
cache the actor would use. On a node cache without the group, a start compiles (cold) and publishes
the group's pack to the packs folder; a fresh node cache given those packs (a fresh machine they
were carried to) pulls the pack and starts warm; `start.json` says which, with what was pulled.
Real mock-server engines with their simulated compile (cold 2 s, warm 0.2 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO
from sweeptools import write_study

SCRIPT = REPO / "scripts/h200/start-only.py"


def _start_only(study, out, packs, node_cache, trial="compiled"):
    env = {**os.environ, "FARM_CACHE_DIR": str(node_cache), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(SCRIPT), str(study), "g", trial, str(out), str(packs)],
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((out / "start.json").read_text()), done.stdout


def test_a_start_on_a_fresh_node_cache_pulls_the_pack_a_cold_start_published(tmp_path):
    study = write_study(tmp_path / "s.yaml", name="starts", grid="g", blocks=[
        {"engine": "mock", "models": ["tiny"], "name": "compiled",
         "flags": {"gpus": 0, "start-s": 2, "warm-start-s": 0.2, "graph": "g1"}}])
    packs = tmp_path / "packs"

    cold, said = _start_only(study, tmp_path / "a", packs, tmp_path / "node-a")
    assert cold["start"] == "cold" and "compile_cache_pulled" not in cold
    assert cold["compile_cache_published"]["files"] >= 1 and "compiled: cold start" in said
    group = cold["compile_cache_group"]
    assert (packs / f"{group}.tgz").is_file()

    warm, _ = _start_only(study, tmp_path / "b", packs, tmp_path / "node-b")
    assert warm["start"] == "warm" and warm["compile_cache_group"] == group
    assert warm["compile_cache_pulled"]["bytes"] == cold["compile_cache_published"]["bytes"]
    assert "compile_cache_published" not in warm  # a warm start publishes nothing
    # the engine itself found its compile cache warm (the mock's log says which; no clock compared)
    assert cold["compile_cache_hit"] is False and warm["compile_cache_hit"] is True

    # a pack damaged on the way is discarded and the start goes cold, never fails
    tgz = packs / f"{group}.tgz"
    tgz.write_bytes(tgz.read_bytes()[:-20] + b"x" * 20)
    again, _ = _start_only(study, tmp_path / "c", packs, tmp_path / "node-c")
    assert again["start"] == "cold" and "checksum" in again["compile_cache_discarded"]
