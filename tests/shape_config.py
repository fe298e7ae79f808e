"""The weight-free Qwen3.5-35B-A3B's config.json as scripts/make-shape-model.py writes it (built by
transformers' Qwen3_5MoeConfig, vision tower included, which SGLang loads and sizes its memory by),
and the exact flags of the SGLang starts on the H200 (bench/h200/engine-logs/*.command.txt)."""

from __future__ import annotations

import functools
import importlib.util
import json
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
H200_LOGS = REPO / "bench" / "h200" / "engine-logs"
# The SGLang 0.5.16 starts on the H200 whose logs print their pools (the image-processor failure
# stopped before loading): four of 2026-12-01, the 512-radix-off trial and FP8 radix-off of 2026-12-03.
SGLANG_STARTS = ("default-dummy-cold-start", "max-running-512-dummy-warm-start",
                 "max-running-512-radix-off-dummy-start-stopped", "fp8-dummy-warm-start",
                 "max-running-512-radix-off-dummy-cold-start", "fp8-radix-off-dummy-start-only",
                 "fp8-dummy-cold-start", "fp8-radix-off-dummy-warm-start",
                 "fp8-kv-cache-fp8-dummy-cold-start", "max-running-256-radix-off-dummy-cold-start",
                 # 2026-12-04: the FP8-KV group from its carried pack on a fresh machine (start only), the
                 # 256-radix-off trial's own start, and 256 and 512 with the radix cache on (same_server)
                 "fp8-kv-cache-fp8-dummy-carried-warm-start", "max-running-256-radix-off-dummy-trial-cold-start",
                 "max-running-256-dummy-same-server-warm-start", "max-running-512-dummy-same-server-warm-start",
                 # 2026-12-04 (afternoon): the primary profile's repeats (pass 2), on a fresh machine whose
                 # packs hold inductor's cache too: each group cold once, then warm on the same node
                 "max-running-256-radix-off-dummy-pass2-cold-start", "fp8-radix-off-dummy-pass2-cold-start",
                 "fp8-dummy-pass2-warm-start", "max-running-512-radix-off-dummy-pass2-warm-start",
                 # 2026-12-04 (evening): pass 2's last three trials on a fresh machine without packs: the
                 # BF16 radix-off and FP8-KV groups cold, then the defaults warm after 512-radix-off
                 "max-running-512-radix-off-dummy-pass2-evening-cold-start", "fp8-kv-cache-fp8-dummy-pass2-cold-start",
                 "default-dummy-pass2-warm-start")


@functools.lru_cache(maxsize=1)
def shape_model_config() -> dict:
    spec = importlib.util.spec_from_file_location("make_shape_model", REPO / "scripts" / "make-shape-model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # The token ids do not touch memory; everything else is what the script saves.
    return json.loads(mod.build_config(eos=0, pad=0).to_json_string())


def command_flags(path: Path) -> dict:
    """`python3 -m sglang.launch_server --a=b --c ...` -> {"a": "b", "c": True}, without the model,
    host and port (the trial's, not the configuration's)."""
    argv = shlex.split(path.read_text())
    flags: dict = {}
    for arg in argv[argv.index("sglang.launch_server") + 1:]:
        name, eq, value = arg[2:].partition("=")
        flags[name] = value if eq else True
    for name in ("model-path", "host", "port"):
        flags.pop(name, None)
    return flags
