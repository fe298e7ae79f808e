#!/usr/bin/env python
"""Test the explanation on the seed's own numbers (../shared/reference/seed-results.json).

If only the role chunk (content "") counts as a token arrival (GPUStack's handler on guidellm
0.5.x, vLLM >= 0.16 streaming thinking as `delta.reasoning`), then for a request that never
leaves the think block first_token = last_token = the role chunk, so guidellm gives
    TPOT = (last_token - start) / output_tokens = TTFT / output_tokens,    ITL = 0.
For a profile with fixed output length every request has the same output_tokens, and guidellm's
token-weighted mean TPOT is then exactly mean TTFT / output_tokens. A client that timed every
token would give instead TPOT ~ latency / output_tokens (guidellm's definition includes TTFT),
and ITL ~ (latency - TTFT) / (output_tokens - 1).

    python3 bench/reasoning/seed_check.py [PATH]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[3] / "shared/reference/seed-results.json"
d = json.loads(path.read_text())
print(f"{'run':34} {'engine':6} {'out/req':>7} {'TPOT':>8} {'TTFT/n':>8} {'lat/n':>8} "
      f"{'(lat-TTFT)/(n-1)':>17} {'ITL':>7} {'med TPOT':>8} {'medTTFT/n':>9}")
for r in d["runs"]:
    m = r["metrics"]
    n = m["total_output_tokens"] / m["successful_requests"]
    ttft_n = m["ttft_mean_ms"] / n
    lat_n = 1000 * m["latency_mean_s"] / n
    itl_true = (1000 * m["latency_mean_s"] - m["ttft_mean_ms"]) / (n - 1)
    print(f"{r['id']:34} {r['engine']:6} {n:7.1f} {m['tpot_mean_ms']:8.2f} {ttft_n:8.2f} {lat_n:8.2f} "
          f"{itl_true:17.2f} {m['itl_mean_ms']:7.2f} {m['tpot_median_ms']:8.2f} {m['ttft_median_ms'] / n:9.2f}")
