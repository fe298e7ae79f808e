#!/usr/bin/env bash
# farm's seed study on a lent H200 without network, in calls of at most 10 minutes that share one
# machine while it stays warm (its /tmp lives as long as the machine).
#
#   bash scripts/h200/device.sh stage            # copy the carried bundle parts into /tmp (one call per ~56 MiB)
#   bash scripts/h200/device.sh prepare          # install what is complete and restore the store; no sweep
#   bash scripts/h200/device.sh run SECONDS      # install what is complete, start (or keep) the sweep, wait;
#                                                # the call ends SECONDS after it began (keep it under 580)
#   FARM_H200_GRID=sglang bash scripts/h200/device.sh run SECONDS   # the SGLang grid (engine-sglang bundle)
#   FARM_H200_GRID=sglang bash scripts/h200/device.sh start-only TRIAL [SECONDS]  # one trial's engine start,
#                                                # no runs (its group's pack pulled first, as a trial's actor
#                                                # does); the call ends SECONDS after it began (default 575),
#                                                # snapshot included: give it what the device has left
#   FARM_H200_GRID=tp bash scripts/h200/device.sh run SECONDS      # nvidia-h200-x2: TP 1/2, DP 2, EP (bench/h200-x2/)
#   FARM_H200_GRID=busy bash scripts/h200/device.sh run SECONDS    # nvidia-h200-x4/-x8: 18 TP1 trials, makespan
#   FARM_H200_GRID=full FARM_H200_SWEEP_ARGS="--strategy halving --budget 1" bash scripts/h200/device.sh run SECONDS
#   FARM_H200_GRID=full FARM_H200_FROM="$(cat bench/h200/engine-logs/vllm-0.20.2-fp8-prefix-throughput-dummy-pass2-fresh-machine-start.command.txt)" \
#     FARM_H200_SWEEP_ARGS="--budget 1" bash scripts/h200/device.sh run SECONDS   # a local search from the seed's command
#
#   bash scripts/h200/device.sh packs-out [FIRST]  # the machine's compile-cache packs, 3 parts of 16 MiB a call
#                                                # from part FIRST (default 0): scripts/h200/packs.sh collects them
#
# Compile caches travel like the bundles: `packs-out` cuts $B/packs (every sweep's --compile-cache)
# into parts that come back under $OUT; scripts/h200/packs.sh checks them into .h200/packs/; `stage`
# carries them to the next machine, where `run` puts them together (every part's sha256 checked)
# into $B/packs before the sweep starts, so each group measured before starts warm there.
#
# FARM_STUDY=configs/xyz.yaml runs another study (default configs/h200-dummy.yaml, whose
# `accelerator_type: auto` takes whichever GPU model the machine has: an H100 runs it unchanged);
# FARM_ACCELERATOR=NAME|auto passes `--accelerator` to its sweeps. Results are per GPU model:
# commit them under bench/<gpu>/ (bench/h200/, bench/h100/, ...).
#
# FARM_H200_FIRST_ONLY=1 runs only the grid's first trials (sweep-job.sh), and FARM_H200_NEXT_ONLY=1
# only the FARM_H200_NEXT trials of a resumed sweep, so a later call can use the GPU for something
# else (another grid) without stopping a sweep midway.
#
# Bundles: farm-node always; engine-vllm for grid seed and as farm-node's base (farm-node was
# resolved against it: pydantic, fastapi, ... come from that tree); engine-sglang for grid sglang.
# The SGLang engine runs on its own tree alone (FARM_SGLANG_PYTHONPATH, the study's engine env), so
# its transformers/tokenizers pins never meet farm's process (bench/h200/README-bundles.md).
#
# `run` starts the sweep as its own session (setsid), so it outlives the call; every later `run`
# waits on it again. Each `run` ends with the store (MLflow SQLite + artifacts), the sweep's log
# and the engines' logs under $OUT: a lost machine costs the trial in flight, never the trials
# before it. A store brought back (.h200/store.tgz, carried) is resumed by the next machine.
set -euo pipefail
CALL_T0=$(date +%s)   # `run N` ends N seconds after the call began, installs and snapshot included
B=${FARM_H200_DIR:-/tmp/farm-h200}
REPO=$(pwd)
STUDY=${FARM_STUDY:-configs/h200-dummy.yaml}   # relative to the project (copied to $B/src), or absolute
case "$STUDY" in /*) STUDY_HERE=$STUDY ;; *) STUDY_HERE="$REPO/$STUDY" ;; esac
mkdir -p "$B"/bundles "$B"/tree "$B"/store "$B"/cache "$B"/runs

stage() {
  for dir in "$REPO"/.bundles/*/; do
    [ -d "$dir" ] || continue
    name=$(basename "$dir")
    mkdir -p "$B/bundles/$name"
    cp -n "$dir"* "$B/bundles/$name/" 2>/dev/null || true
  done
  # The model and the store ride with a bundle part when the run call has no room for them
  # (farm-node's 50 MiB + the tree fill a call): kept here for `run`.
  [ -d "$REPO/.models" ] && { rm -rf "$B/models"; cp -r "$REPO/.models" "$B/models"; }
  [ -f "$REPO/.h200/store.tgz" ] && cp "$REPO/.h200/store.tgz" "$B/store-carried.tgz"
  if [ -d "$REPO/.h200/packs" ]; then mkdir -p "$B/packs-in"; cp -n "$REPO/.h200/packs/"* "$B/packs-in/" 2>/dev/null || true; fi
  du -sh "$B"/bundles/* "$B"/models "$B"/store-carried.tgz 2>/dev/null || true
}

PACK_PART_BYTES=${FARM_H200_PACK_PART_BYTES:-$(( 16 * 1024 * 1024 ))}   # what one file under $OUT may be
PACK_PARTS_A_CALL=3                        # 48 MiB: beside the store and the logs in one call's 64 MiB

caches_elsewhere() {
  # What the engines cached outside farm's node cache (so outside every pack): a warm start from a
  # carried pack that is slower than a warm start on the node that compiled the group lacks these.
  # Sizes and the newest file's time, to tell what this machine's starts wrote; nothing is moved.
  local d
  for d in "$HOME"/.cache/* "$HOME"/.nv/ComputeCache "$HOME"/.triton /tmp/torchinductor_* /tmp/*cache* \
           /root/.cache/* /var/tmp/*cache*; do
    [ -e "$d" ] || continue
    echo "cache elsewhere: $(du -sh "$d" 2>/dev/null | cut -f1) $d (newest $(find "$d" -type f -printf '%TY-%Tm-%Td %TH:%TM\n' 2>/dev/null | sort | tail -1))"
  done | sort -u | head -40 || true
}

packs_out() {
  caches_elsewhere
  # The packs as one tar (already gzip'd inside: not compressed again), cut into parts; a manifest
  # names every part with its sha256 and the keys it holds. Made once per machine state: a later
  # call sends the next parts of the same cut, and a new cut only once the packs have changed.
  local first=${1:-0} out=${OUT:-$B/out} cut="$B/packs-out"
  mkdir -p "$out"
  if ! ls "$B"/packs/*.tgz >/dev/null 2>&1; then echo "packs-out: no pack in $B/packs"; return 0; fi
  local state; state=$(cd "$B/packs" && ls -l --time-style=+%s -- *.tgz *.json 2>/dev/null | sha256sum | cut -c1-16)
  if [ ! -f "$cut/state" ] || [ "$(cat "$cut/state")" != "$state" ]; then
    rm -rf "$cut"; mkdir -p "$cut"
    (cd "$B/packs" && tar -cf "$cut/packs.tar" -- *.tgz *.json)
    (cd "$cut" && split -b "$PACK_PART_BYTES" -d -a 3 packs.tar packs.part && rm packs.tar)
    (cd "$cut" && { echo "# farm compile-cache packs, $(date -u +%FT%TZ): sha256 part; keys below"
                    sha256sum packs.part*; (cd "$B/packs" && ls -- *.tgz | sed 's/\.tgz$//; s/^/# key /'); } > packs.manifest)
    echo "$state" > "$cut/state"
  fi
  local parts=("$cut"/packs.part*) n=0 i
  for (( i = first; i < ${#parts[@]} && n < PACK_PARTS_A_CALL; i++, n++ )); do cp "${parts[$i]}" "$out/"; done
  cp "$cut/packs.manifest" "$out/"
  echo "packs-out: parts $first-$(( first + n - 1 )) of ${#parts[@]} ($(du -sh "$B/packs" | cut -f1) of packs)" \
       "$([ $(( first + n )) -lt ${#parts[@]} ] && echo "; next: packs-out $(( first + n ))" || echo "; all sent")"
}

packs_in() {
  # Carried parts put together into $B/packs once all of them arrived and each matches the
  # manifest; anything short of that is said and left: the sweep then starts cold, never fails.
  local in="$B/packs-in"
  [ -f "$in/packs.manifest" ] || return 0
  [ -f "$in/.done" ] && return 0
  local missing; missing=$(cd "$in" && grep -v '^#' packs.manifest | awk '{print $2}' | while read -r f; do [ -f "$f" ] || echo "$f"; done)
  if [ -n "$missing" ]; then echo "packs-in: $(echo "$missing" | wc -l) part(s) not carried yet: starting cold"; return 0; fi
  if ! (cd "$in" && grep -v '^#' packs.manifest | sha256sum --quiet -c -); then
    echo "packs-in: a carried part does not match its sha256: packs discarded, starting cold"; return 0
  fi
  mkdir -p "$B/packs"
  (cd "$in" && cat $(grep -v '^#' packs.manifest | awk '{print $2}') | tar -xf - -C "$B/packs" --skip-old-files)
  touch "$in/.done"
  echo "packs-in: $(grep -c '^# key ' "$in/packs.manifest") pack(s) carried into $B/packs"
}

bundle_state() {
  # "ready PATH:PATH" when every part arrived and the bundles it was resolved against
  # (manifest.json needs_on_pythonpath) are installed; "parts missing" or "needs NAME" otherwise.
  python3 - "$1" "$B/tree" <<'PY'
import json, pathlib, sys
d, tree = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
m = json.loads((d / "manifest.json").read_text())
if not all((d / p["file"]).is_file() for p in m["parts"]):
    print("parts missing"); sys.exit()
needs = m.get("needs_on_pythonpath", [])
missing = [n for n in needs if not (tree / n / ".installed").is_file()]
print(f"needs {' '.join(missing)}" if missing else "ready " + ":".join(str(tree / n) for n in needs))
PY
}

install_complete() {
  # A bundle is installed once all of its parts have arrived (install.sh checks their sha256) and the
  # bundles it was resolved against are: its import check runs with exactly those trees on PYTHONPATH
  # (engine bundles: none; farm-node: engine-vllm). Two rounds: a base bundle first, then what needs it.
  for round in 1 2; do
    for dir in "$B"/bundles/*/; do
      [ -f "$dir/manifest.json" ] || continue
      name=$(basename "$dir")
      [ -f "$B/tree/$name/.installed" ] && continue
      state=$(bundle_state "$dir")
      case "$state" in
        ready*)
          start=$(date +%s)
          rm -rf "$B/tree/$name"   # install.sh refuses a non-empty target (an interrupted install)
          PYTHONPATH="${state#ready }" sh "$dir/install.sh" "$B/tree/$name"
          touch "$B/tree/$name/.installed"
          echo "installed $name in $(( $(date +%s) - start )) s" ;;
        *) [ "$round" = 2 ] && echo "bundle $name: $state, not installed yet" ;;
      esac
    done
  done
}

engine_facts() {
  # What the installed engine says of itself, once per machine: its version and every flag it
  # takes (farm/engines/facts/<engine>-<version>-help.txt: `--from` checks a user's command
  # against it; tests/unit/engines check farm's rendered flags against it). $2: its serve module.
  local f="$B/facts/$1"; [ -f "$f/help.txt" ] && return 0
  mkdir -p "$f"
  PYTHONPATH="$B/tree/engine-$1" python3 -c "import $1; print($1.__version__)" > "$f/version.txt" 2>&1 || true
  # shellcheck disable=SC2086
  case "$2" in *--help*) help=() ;; *) help=(--help) ;; esac   # $2 may carry its own --help=...
  COLUMNS=200 PYTHONPATH="$B/tree/engine-$1" timeout 120 python3 -m $2 "${help[@]}" > "$f/help.txt" 2>&1 || true
  echo "$1 $(head -1 "$f/version.txt"): --help $(wc -l < "$f/help.txt") lines"
}

start_only() {
  # The trial's engine started as farm's actor starts it (scripts/h200/start-only.py), then stopped.
  if [ -f "$B/job.pid" ] && kill -0 "$(cat "$B/job.pid")" 2>/dev/null; then
    echo "a sweep is running: start-only needs the GPU to itself"; snapshot; return 0
  fi
  install_complete
  packs_in   # carried packs first: the start pulls its group's pack as a trial's actor would
  # The start ends SECONDS after the call began (installs counted in), so the snapshot below always
  # runs: a start cut off by the call's own end brings back its engine log up to there. On a fresh
  # machine the installs take ~85 s of it (2026-12-03: a call cut at 330 s brought back nothing).
  left=$(( CALL_T0 + ${2:-575} - 20 - $(date +%s) ))
  if [ "$left" -lt 30 ]; then echo "start-only: $left s left of the call: not started"; snapshot; return 0; fi
  PYTHONPATH="$REPO:$B/tree/farm-node:$B/tree/engine-vllm" FARM_ENGINE_PYTHONPATH="$B/tree/engine-vllm" \
    FARM_SGLANG_PYTHONPATH="$B/tree/engine-sglang" FARM_CACHE_DIR="$B/cache" HF_HUB_OFFLINE=1 \
    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
    timeout "$left" python3 "$REPO/scripts/h200/start-only.py" "$STUDY_HERE" \
    "${FARM_H200_GRID:-seed}" "$1" "$B/start-only/$1" "$B/packs" > "$B/start-only-$1.out" 2>&1 \
    || echo "start-only ended with $? (124: stopped at the call's end, $left s)"
  tail -5 "$B/start-only-$1.out"
  snapshot
}

snapshot() {
  out=${OUT:-$B/out}; mkdir -p "$out"
  if [ -f "$B/store/mlflow.db" ]; then
    mkdir -p "$B/snap"; rm -rf "$B/snap/"*
    python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" \
      "$B/store/mlflow.db" "$B/snap/mlflow.db"
    cp "$B/store/"sweep-id* "$B/snap/" 2>/dev/null || true
    [ -d "$B/store/mlruns" ] && cp -r "$B/store/mlruns" "$B/snap/"
    tar -czf "$out/store.tgz" -C "$B/snap" .
  fi
  cp "$B/sweep.log" "$out/sweep.log" 2>/dev/null || true
  cp "$B/gpus.txt" "$B/gpu-apps.csv" "$out/" 2>/dev/null || true   # several GPUs: scripts/h200/gpu_visibility.py
  (cd "$B" && find runs start-only -name engine.log -o -name command.txt -o -name start.json 2>/dev/null | tar -czf "$out/engine-logs.tgz" -T - 2>/dev/null) || true
  [ -d "$B/facts" ] && tar -czf "$out/engine-facts.tgz" -C "$B" facts
  { date -u; nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv; du -sh "$B"/* 2>/dev/null; } > "$out/status.txt" 2>&1
}

run() {
  wait_s=${1:-540}
  grid=${FARM_H200_GRID:-seed}
  install_complete
  need=(farm-node engine-vllm)          # farm's own tree and its base
  [ "$grid" = sglang ] && need+=(engine-sglang)
  for name in "${need[@]}"; do
    if [ ! -f "$B/tree/$name/.installed" ]; then
      echo "bundle $name not installed (grid $grid needs ${need[*]}): nothing started"; snapshot; return 0
    fi
  done
  [ "$grid" = sglang ] && engine_facts sglang sglang.launch_server
  # vLLM 0.20's plain --help lists only its config groups; --help=all lists every flag
  engine_facts vllm "vllm.entrypoints.cli.main serve --help=all"
  # FARM_H200_STORE: the committed bench/h200/store.tgz when nothing newer needs carrying
  store_tgz="$REPO/${FARM_H200_STORE:-.h200/store.tgz}"
  [ -f "$store_tgz" ] || store_tgz="$B/store-carried.tgz"   # carried by an earlier call (stage)
  if [ ! -f "$B/store/mlflow.db" ] && [ -f "$store_tgz" ]; then
    tar -xzf "$store_tgz" -C "$B/store"   # resume what an earlier machine measured
    # each grid's sweep keeps an id file of its own (sweep-job.sh): name them all, not seed's alone
    echo "store restored from ${store_tgz#"$REPO/"} ($(cd "$B/store" && for f in sweep-id*; do printf '%s %s; ' "$f" "$(cat "$f")"; done))"
  fi
  if [ "${PREPARE_ONLY:-0}" = 1 ]; then echo "prepared: bundles installed, store restored; no sweep started"; return 0; fi
  if [ -f "$B/job.pid" ] && kill -0 "$(cat "$B/job.pid")" 2>/dev/null; then
    echo "sweep already running (pid $(cat "$B/job.pid"))"
  else
    packs_in   # carried compile caches first: the sweep's first start of each group is warm
    if [ ! -f "$STUDY_HERE" ]; then echo "FARM_STUDY: no study file $STUDY_HERE: nothing started"; snapshot; return 0; fi
    rm -rf "$B/src" && mkdir -p "$B/src" && cp -r "$REPO"/farm "$REPO"/actors "$REPO"/configs "$REPO"/scripts "$B/src/"
    # a study of the project outside configs/ travels to the copy too, at its own path
    case "$STUDY" in /*) ;; *) [ -f "$B/src/$STUDY" ] || { mkdir -p "$B/src/$(dirname "$STUDY")"; cp "$STUDY_HERE" "$B/src/$STUDY"; } ;; esac
    if [ -d "$REPO/.models" ]; then cp -r "$REPO/.models" "$B/src/.models"; else cp -r "$B/models" "$B/src/.models"; fi
    FARM_H200_GRID=$grid FARM_STUDY=$STUDY setsid nohup bash "$REPO/scripts/h200/sweep-job.sh" "$B" > "$B/sweep.log" 2>&1 < /dev/null &
    echo $! > "$B/job.pid"
    echo "sweep started (pid $!)"
  fi
  # The snapshot takes ~15 s; the rest of the N seconds is waiting (installs counted in).
  deadline=$(( CALL_T0 + wait_s - 15 ))
  seen=$(grep -c "^\[" "$B/sweep.log" 2>/dev/null || true)
  while kill -0 "$(cat "$B/job.pid")" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do
    sleep 10
    # Back early when a trial failed or the driver broke: the next call can change course.
    if grep -qE "Traceback|engine_failed_to_start|invalid_flags|^error:" "$B/sweep.log" 2>/dev/null \
       && [ "${FARM_H200_EARLY:-1}" = 1 ] && [ "$(grep -c "^\[" "$B/sweep.log")" != "$seen" ]; then
      echo "a trial failed: returning early"; break
    fi
  done
  grep -E "^\[|sweep |resumed|recommended|error|Traceback" "$B/sweep.log" | tail -30 || true
  kill -0 "$(cat "$B/job.pid")" 2>/dev/null && echo "sweep still running" || echo "sweep job ended"
  snapshot
}

case "${1:-}" in
  stage) stage ;;
  run) stage; run "${2:-540}" ;;
  # installs, engine facts and the store, without a sweep (~100 s on a fresh machine): the next
  # `run` starts its trial at once, so a trial of up to ~9 minutes ends within that one call
  prepare) stage; PREPARE_ONLY=1 run 0 ;;
  start-only) stage; start_only "${2:?trial name}" "${3:-575}" ;;
  packs-out) packs_out "${2:-0}" ;;
  packs-in) stage; packs_in ;;   # what `run` does first; alone for a check
  *) echo "usage: $0 stage | prepare | run [SECONDS] | start-only TRIAL | packs-out [FIRST] | packs-in" >&2; exit 2 ;;
esac
