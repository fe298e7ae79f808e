#!/usr/bin/env bash
# The sweep itself, as one session that outlives the device call that started it (device.sh run).
# First the baseline and the seed's recommended command (they carry the repeats), then the rest
# of the grid by --resume; a store restored from an earlier machine resumes where it stopped.
set -uo pipefail
B=$1
export PYTHONPATH="$B/src:$B/tree/farm-node:$B/tree/engine-vllm"
export FARM_ENGINE_PYTHONPATH="$B/tree/engine-vllm"   # vLLM's process: its bundle tree (the study's engine env)
export FARM_SGLANG_PYTHONPATH="$B/tree/engine-sglang" # SGLang's process: its own tree only
export FARM_CACHE_DIR="$B/cache"                  # the node's compile caches live here, across trials
export GUIDELLM__MAX_WORKER_PROCESSES=8          # 16 cores: 512 requests in flight need more than 2 client workers
export RAY_USAGE_STATS_ENABLED=0 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd "$B/store"
# On a machine of several GPUs: which process holds which GPU, every 5 s while the sweep runs
# (scripts/h200/gpu_visibility.py checks that each engine held exactly its GPUs).
nvidia-smi -L > "$B/gpus.txt" 2>&1 || true
if [ "$(grep -c '^GPU ' "$B/gpus.txt")" -gt 1 ]; then
  ( while sleep 5; do
      t=$(date +%s)
      nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits 2>/dev/null |
        while IFS=', ' read -r pid uuid mem; do echo "$t,$pid,$(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' '),$uuid,$mem"; done
    done >> "$B/gpu-apps.csv" ) &
  sampler=$!
  trap 'kill "$sampler" 2>/dev/null' EXIT
fi
farm() { python3 -m farm.cli "$@"; }
# FARM_H200_GRID picks the grid (seed: vLLM, the default; sglang: SGLang). Each grid is its own
# sweep with its own id file (seed keeps `sweep-id`, so sweep aa0e8ed8... resumes as before).
grid=${FARM_H200_GRID:-seed}
idfile=sweep-id; [ "$grid" = seed ] || idfile="sweep-id.$grid"
# FARM_H200_FROM="vllm serve ...": a local search of the grid from that command (one argument,
# whatever it holds); its own sweep-id file, so a halving sweep of the same grid is not resumed.
start=()
if [ -n "${FARM_H200_FROM:-}" ]; then start=(--strategy local --from "$FARM_H200_FROM"); idfile="sweep-id.$grid-local"; fi
case "$grid" in
  seed) first=(--trial engine_vllm_default --trial step3_performance_mode) ;;
  # the baseline and the case the issue is about (512 asked, 83 run) before the rest
  # the baseline, then 512 asked with the radix cache off (the limit SGLang does honour); 512 with
  # the radix cache on (asked 512, ran 83) comes next in the grid's order
  sglang) first=(--trial engine_sglang_default --trial sglang_running_512_radix_off) ;;
  *) first=() ;;
esac
# FARM_STUDY=configs/xyz.yaml: the study (relative to the project, which device.sh copies to $B/src;
# or an absolute path); default the seed's study, whose `accelerator_type: auto` takes the GPU model
# the machine has. FARM_ACCELERATOR=H100 (or auto) passes --accelerator: the sweep's GPU model.
study=${FARM_STUDY:-configs/h200-dummy.yaml}
case "$study" in /*) ;; *) study="$B/src/$study" ;; esac
accel=()
if [ -n "${FARM_ACCELERATOR:-}" ]; then accel=(--accelerator "$FARM_ACCELERATOR"); fi
# Every sweep on the machine shares its compile caches through $B/packs (actors/compile_cache.py): a
# group compiled once by any sweep (the grid `starts`, a seed resume, the local search) starts warm
# in every later one, whatever node cache it runs on.
common=(--config "$study" --grid "$grid" --tracking-uri "sqlite:///$B/store/mlflow.db"
        --workdir "$B/runs" --compile-cache "$B/packs" "${accel[@]}")
if [ "$grid" != starts ] && [ ! -f "$idfile" ]; then
  # The id is kept as soon as the sweep prints it: a machine lost mid-trial is resumed, not restarted.
  # FARM_H200_SWEEP_ARGS="--strategy halving --budget 1": options of the new sweep (a resume reads
  # its strategy and budget back from the sweep's run).
  # shellcheck disable=SC2086
  farm sweep "${common[@]}" "${first[@]}" "${start[@]}" ${FARM_H200_SWEEP_ARGS:-} 2>&1 | while IFS= read -r line; do
    printf '%s\n' "$line"
    if [[ ! -f $idfile && $line =~ ^sweep\ ([0-9a-f]{32}) ]]; then echo "${BASH_REMATCH[1]}" > "$idfile"; fi
  done
  rc=${PIPESTATUS[0]}
  # No sweep id: the sweep never started (its one-line error is above); nothing to resume or report.
  if [ ! -f "$idfile" ]; then
    echo "sweep job ended: the first sweep started none (exit $rc)"; exit $(( rc ? rc : 1 ))
  fi
fi
if [ "$grid" = starts ]; then
  # Issue "Warm starts": the grid's two compile groups started cold on node cache A, publishing
  # their packs to $B/packs; then a second sweep on an empty node cache B pulls them and starts
  # warm, as a fresh machine would with the packs carried to it. Both sweeps in the store.
  for node in a b; do
    if [ ! -f "sweep-id.starts-$node" ]; then
      FARM_CACHE_DIR="$B/cache-starts-$node" farm sweep "${common[@]}" 2>&1 |
        while IFS= read -r line; do
          printf '%s\n' "$line"
          if [[ ! -f sweep-id.starts-$node && $line =~ ^sweep\ ([0-9a-f]{32}) ]]; then
            echo "${BASH_REMATCH[1]}" > "sweep-id.starts-$node"; fi
        done
    else
      FARM_CACHE_DIR="$B/cache-starts-$node" farm sweep "${common[@]}" \
        --resume "$(cat "sweep-id.starts-$node")"
    fi
  done
  echo "sweep job done"; exit 0
fi
if [ "${FARM_H200_FIRST_ONLY:-0}" = 1 ]; then echo "sweep job done (first trials only)"; exit 0; fi
# FARM_H200_NEXT="step3_performance_mode ..." runs those pending trials of the sweep first.
if [ -n "${FARM_H200_NEXT:-}" ]; then
  next=(); for t in $FARM_H200_NEXT; do next+=(--trial "$t"); done
  farm sweep "${common[@]}" --resume "$(cat "$idfile")" "${next[@]}"
fi
# FARM_H200_RESUME_ARGS="--repeats auto --run-budget N": options of this resume, e.g. the later
# passes of --repeats auto on the primary profile for the trials whose intervals still overlap.
# FARM_H200_NEXT_ONLY=1 stops after the FARM_H200_NEXT trials, so that the next call can give the
# GPU to another grid's sweep at a trial's end rather than losing a trial in flight.
if [ "${FARM_H200_NEXT_ONLY:-0}" != 1 ]; then
  # shellcheck disable=SC2086
  farm sweep "${common[@]}" --resume "$(cat "$idfile")" ${FARM_H200_RESUME_ARGS:-}
fi
suffix=""; [ "$grid" = seed ] || suffix="-$grid"
farm report "$(cat "$idfile")" --tracking-uri "sqlite:///$B/store/mlflow.db" --format markdown --out "$B/store/report$suffix" \
  > "$B/store/report$suffix.md"
echo "sweep job done"
