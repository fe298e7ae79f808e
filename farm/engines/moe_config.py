"""Which fused-MoE kernel config an engine ran, read from its log: a tuned file it found (which one)
or its built-in default (issue 47).

vLLM and SGLang pick a Triton fused-MoE config per expert shape and GPU from a JSON file named for
both (`E=256,N=512,device_name=NVIDIA_H200,dtype=fp8_w8a8.json`); where none ships for the GPU, both
fall back to a default, with a warning: tuned kernels are reported 8-24 % faster, so a trial that ran
the default measured a kernel path a tuned deployment would not run. The two engines' lines:

- vLLM 0.20/0.32 (`fused_moe.get_moe_configs`): "Using configuration from PATH for MoE layer." or
  "Using default MoE config. Performance might be sub-optimal! Config file not found at PATH[, PATH]"
  (the second path when VLLM_TUNED_CONFIG_FOLDER is set: the same file name in that folder).
- SGLang 0.5 (`fused_moe_triton_config.get_config`): "Using MoE kernel config from PATH." or "Using
  default MoE kernel config. Performance might be sub-optimal! Config file not found at PATH, you
  can create them with ..." (one line each for the up and the `_down` projection's file)."""

from __future__ import annotations

import re
from typing import Any

# a file found: the whole path (which file: shipped with the engine, or a tuning's folder)
_TUNED = re.compile(r"Using (?:configuration|MoE kernel config) from (\S+?\.json)")
# the default: the file name it looked for (the shape and the GPU), each path of the line
_DEFAULT = re.compile(r"Using default MoE (?:kernel )?config\. Performance might be sub-optimal! "
                      r"Config file not found at ([^\n]*\.json)")


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def moe_kernel_config(log_text: str) -> dict[str, Any]:
    """`moe_config`: "tuned" (every MoE shape found its file), "default" (none did) or "partly tuned";
    `moe_config_files`: each file by name -> the path it was read from, or "default" where it was
    not found. Empty when the log says neither (a dense model, a CPU build, a start cut short)."""
    files: dict[str, str] = {}
    for m in _TUNED.finditer(log_text):
        files.setdefault(_name(m.group(1)), m.group(1))
    for m in _DEFAULT.finditer(log_text):
        for path in m.group(1).split(", "):
            files.setdefault(_name(path), "default")
    if not files:
        return {}
    defaults = sum(1 for v in files.values() if v == "default")
    kind = "default" if defaults == len(files) else "tuned" if defaults == 0 else "partly tuned"
    return {"moe_config": kind, "moe_config_files": files}


def moe_config_text(reported: dict[str, Any]) -> str | None:
    """What a run's record says of it, from its start's `engine_reported`: "default: FILE",
    "tuned: FILE from PATH", "partly tuned: ..."; None where the log said neither. A start recorded
    before the files were named kept only `default_moe_config` (True): "default"."""
    kind, files = reported.get("moe_config"), reported.get("moe_config_files")
    if kind is None:
        return "default" if reported.get("default_moe_config") is True else None
    if not isinstance(files, dict) or not files:
        return str(kind)
    each = [f"{name} default" if where == "default" else f"{name} from {where}" for name, where in files.items()]
    if kind == "default":
        return "default: " + "; ".join(files)
    return f"{kind}: " + "; ".join(each)
