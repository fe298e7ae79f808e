#!/usr/bin/env bash
# farm's seed study on a lent H200 without network, in calls of at most 10 minutes that share one
# machine while it stays warm (its /tmp lives as long as the machine).
#
#   bash scripts/h200/device.sh stage            # copy the carried bundle parts into /tmp (one call per ~56 MiB)
#   bash scripts/h200/device.sh run SECONDS      # install what is complete, start (or keep) the sweep, wait
#
# `run` starts the sweep as its own session (setsid), so it outlives the call; every later `run`
# waits on it again. Each `run` ends with the store (MLflow SQLite + artifacts), the sweep's log
# and the engines' logs under $OUT: a lost machine costs the trial in flight, never the trials
# before it. A store brought back (.h200/store.tgz, carried) is resumed by the next machine.
set -euo pipefail
B=${FARM_H200_DIR:-/tmp/farm-h200}
REPO=$(pwd)
mkdir -p "$B"/bundles "$B"/tree "$B"/store "$B"/cache "$B"/runs

stage() {
  for dir in "$REPO"/.bundles/*/; do
    [ -d "$dir" ] || continue
    name=$(basename "$dir")
    mkdir -p "$B/bundles/$name"
    cp -n "$dir"* "$B/bundles/$name/" 2>/dev/null || true
  done
  du -sh "$B"/bundles/* 2>/dev/null || true
}

install_complete() {
  # A bundle is installed once all of its parts have arrived (install.sh checks their sha256).
  for dir in "$B"/bundles/*/; do
    name=$(basename "$dir")
    [ -f "$B/tree/$name/.installed" ] && continue
    if python3 - "$dir" <<'PY'
import json, pathlib, sys
d = pathlib.Path(sys.argv[1]); m = json.loads((d / "manifest.json").read_text())
sys.exit(0 if all((d / p["file"]).is_file() for p in m["parts"]) else 1)
PY
    then
      start=$(date +%s)
      # farm-node is resolved on top of engine-vllm: its import check needs that tree too
      PYTHONPATH="$B/tree/engine-vllm" sh "$dir/install.sh" "$B/tree/$name"
      touch "$B/tree/$name/.installed"
      echo "installed $name in $(( $(date +%s) - start )) s"
    else
      echo "bundle $name: parts missing, not installed yet"
    fi
  done
}

snapshot() {
  out=${OUT:-$B/out}; mkdir -p "$out"
  if [ -f "$B/store/mlflow.db" ]; then
    mkdir -p "$B/snap"; rm -rf "$B/snap/"*
    python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" \
      "$B/store/mlflow.db" "$B/snap/mlflow.db"
    cp "$B/store/sweep-id" "$B/snap/" 2>/dev/null || true
    [ -d "$B/store/mlruns" ] && cp -r "$B/store/mlruns" "$B/snap/"
    tar -czf "$out/store.tgz" -C "$B/snap" .
  fi
  cp "$B/sweep.log" "$out/sweep.log" 2>/dev/null || true
  (cd "$B" && find runs -name engine.log -o -name command.txt | tar -czf "$out/engine-logs.tgz" -T - 2>/dev/null) || true
  { date -u; nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv; du -sh "$B"/* 2>/dev/null; } > "$out/status.txt" 2>&1
}

run() {
  wait_s=${1:-540}
  install_complete
  if [ ! -f "$B/tree/engine-vllm/.installed" ] || [ ! -f "$B/tree/farm-node/.installed" ]; then
    echo "bundles incomplete: nothing started"; snapshot; return 0
  fi
  if [ ! -f "$B/store/mlflow.db" ] && [ -f "$REPO/.h200/store.tgz" ]; then
    tar -xzf "$REPO/.h200/store.tgz" -C "$B/store"   # resume what an earlier machine measured
    echo "store restored from .h200/store.tgz (sweep $(cat "$B/store/sweep-id" 2>/dev/null))"
  fi
  if [ -f "$B/job.pid" ] && kill -0 "$(cat "$B/job.pid")" 2>/dev/null; then
    echo "sweep already running (pid $(cat "$B/job.pid"))"
  else
    rm -rf "$B/src" && mkdir -p "$B/src" && cp -r "$REPO"/farm "$REPO"/actors "$REPO"/configs "$REPO"/scripts "$B/src/"
    cp -r "$REPO/.models" "$B/src/.models"
    setsid nohup bash "$REPO/scripts/h200/sweep-job.sh" "$B" > "$B/sweep.log" 2>&1 < /dev/null &
    echo $! > "$B/job.pid"
    echo "sweep started (pid $!)"
  fi
  start=$(date +%s)
  seen=$(grep -c "^\[" "$B/sweep.log" 2>/dev/null || true)
  while kill -0 "$(cat "$B/job.pid")" 2>/dev/null && [ $(( $(date +%s) - start )) -lt "$wait_s" ]; do
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
  *) echo "usage: $0 stage | run [SECONDS]" >&2; exit 2 ;;
esac
