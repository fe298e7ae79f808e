"""A hybrid model's state blocks under vLLM (farm/analysis/memory_fit.py: state_blocks), against
what vLLM 0.20.2 logged: the H100 start that refused the seed's command (bench/h100/engine-logs/:
"max_num_seqs (2048) exceeds available Mamba cache blocks (1515)"), the H100 starts of the local
search from it, and every committed H200 start (bench/h200/engine-logs/: their KV memory and
concurrency). With FULL CUDA graphs every running
request holds one block, so a trial asking for more requests at once than it gets blocks does not
start; farm says so before the start, and names the cap that would start."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from farm.analysis import memory_fit as mf
from sweeptools import shape_config
from farm.engines import get_engine

REPO = Path(__file__).resolve().parents[3]
H100_LOG = REPO / "bench/h100/engine-logs/vllm-0.20.2-fp8-prefix-throughput-dummy-h100-refused-start.log"
H200_LOGS = sorted((REPO / "bench/h200/engine-logs").glob("vllm-0.20.2-*.log"))
GIB = 1024 ** 3


CONFIG = shape_config()
SHAPE = mf.shape_from_config(CONFIG)
VLLM = get_engine("vllm")
SEED = {"max-model-len": 32768, "quantization": "fp8", "enable-prefix-caching": True, "performance-mode": "throughput"}


def _flags_of(log: Path) -> dict:
    """The start's flags from its command file (`<log>.command.txt` beside it), as farm rendered them."""
    command = log.with_name(log.name.removesuffix(".log") + ".command.txt")
    flags = {}
    for m in re.finditer(r"--([\w-]+)(?:=(\S+))?", command.read_text() if command.exists() else ""):
        flags[m.group(1)] = True if m.group(2) is None else m.group(2)
    return flags


def _engine_blocks(log_text: str, flags: dict) -> int:
    """The blocks vLLM had: its own count where it named it, else its logged KV memory laid out as
    vLLM lays it (the layout itself is checked against the named count below)."""
    named = VLLM.named_limits(log_text).get("state_blocks")
    if named is not None:
        return named
    gib = float(re.search(r"Available KV cache memory: ([\d.]+) GiB", log_text).group(1))
    settings = VLLM.memory_settings(flags, None)
    return mf.state_blocks(SHAPE, settings, VLLM.memory_reserve, gib * GIB)


def test_the_h100_refusal_names_the_blocks_and_the_cap():
    text = H100_LOG.read_text()
    assert VLLM.named_limits(text) == {"state_blocks": 1515, "running_requests_limit": 1515}
    failure = VLLM.classify(text)
    assert failure.status == "oom" and "state (Mamba cache) blocks" in failure.reason
    assert failure.line.endswith("Please lower max_num_seqs to at most 1515 or increase gpu_memory_utilization.")


def test_vllms_block_layout_on_its_own_kv_memory_gives_the_blocks_it_named():
    # 30.52 GiB (as logged, to 0.01 GiB) in groups of 10 layers, a page of 1,056 tokens x 2 KiB
    blocks = mf.state_blocks(SHAPE, VLLM.memory_settings(SEED, None), VLLM.memory_reserve, 30.52 * GIB)
    assert abs(blocks - 1515) <= 1


def test_the_seeds_command_on_the_h100_is_refused_before_it_starts_with_a_cap_that_starts():
    p = mf.trial_fit("vllm", SEED, None, CONFIG, "H100")
    assert not p.fits and p.max_running_requests == 2048  # throughput mode doubles vLLM's 1024 on a >= 70 GiB GPU
    assert abs(p.state_slots / 1515 - 1) < 0.02          # -0.4 % (1,509 predicted)
    assert "2,048 requests at once" in p.reason and "state blocks" in p.reason
    # the repair stays under what vLLM had: it starts
    assert p.repair_running_requests is not None and p.repair_running_requests <= 1515
    repaired = mf.trial_fit("vllm", {**SEED, "max-num-seqs": p.repair_running_requests}, None, CONFIG, "H100")
    assert repaired.fits


H100_LOGS = sorted((REPO / "bench/h100/engine-logs").glob("vllm-0.20.2-*-start.log"))
# An MTP start's drafter adds a layer the block model does not count: not among them. The H100's
# are the local search's starts (bench/h100/from-seed/), the refused one apart (above).
MEASURED = [p for p in H200_LOGS + H100_LOGS
            if "Available KV cache memory" in p.read_text() and "mtp" not in p.name and "refused" not in p.name]


def test_the_h100_starts_are_among_them():
    assert sum("h100" in p.name for p in MEASURED) >= 2


@pytest.mark.parametrize("log", MEASURED, ids=lambda p: p.name)
def test_every_start_fits_and_its_blocks_are_predicted_within_two_percent(log):
    text = log.read_text()
    flags = {"max-model-len": 32768, **_flags_of(log)}
    assert "quantization" in flags or "bf16" in log.name  # the start's own flags were read
    p = mf.trial_fit("vllm", flags, None, CONFIG, "H100" if "h100" in log.name else "H200")
    engine = _engine_blocks(text, flags)
    assert p.fits, p.reason  # it started on the H200
    assert abs(p.state_slots / engine - 1) < 0.02, (p.state_slots, engine)
    # the layout agrees with the engine's own concurrency: its blocks are a whole number of requests'
    # worth (32,768 tokens of attention blocks and one or two state blocks per state group)
    concurrency = float(re.search(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", text).group(1))
    per_request = engine / concurrency
    assert abs(per_request - round(per_request)) < 0.05, per_request


def test_eager_mode_holds_no_block_per_running_request():
    p = mf.trial_fit("vllm", {**SEED, "enforce-eager": True}, None, CONFIG, "H100")
    assert p.fits and p.state_slots is not None
