#!/usr/bin/env bash
# Compile-cache packs brought back from a lent H200 (`device.sh packs-out`), kept for the next one.
#
#   bash scripts/h200/packs.sh collect /work/.device/N ...   # the parts those calls brought back -> .h200/packs/
#   bash scripts/h200/packs.sh carry                          # the `stage` calls that take them to a new machine
#
# A machine's packs come back in parts of 16 MiB (at most 8 files of 16 MiB return from a call),
# and travel to the next machine three parts a `stage` call (64 MiB a call, the tree included).
# `collect` keeps the parts of one cut only (its manifest), and says which are still missing.
set -euo pipefail
REPO=$(pwd)
DEST="$REPO/.h200/packs"

collect() {
  [ $# -gt 0 ] || { echo "packs.sh collect: name the folders the device calls brought back" >&2; exit 2; }
  local newest="" d
  for d in "$@"; do   # the manifest of the latest cut wins: parts of an older cut are another tar
    [ -f "$d/packs.manifest" ] || continue
    if [ -z "$newest" ] || [ "$(head -1 "$d/packs.manifest")" \> "$(head -1 "$newest")" ]; then newest="$d/packs.manifest"; fi
  done
  [ -n "$newest" ] || { echo "packs.sh collect: no packs.manifest in $*" >&2; exit 2; }
  if [ -f "$DEST/packs.manifest" ] && ! cmp -s "$DEST/packs.manifest" "$newest"; then rm -rf "$DEST"; fi
  mkdir -p "$DEST"; cp "$newest" "$DEST/packs.manifest"
  local sum part src
  while read -r sum part; do
    [ -f "$DEST/$part" ] && continue
    for d in "$@"; do
      src="$d/$part"
      if [ -f "$src" ] && [ "$(sha256sum "$src" | cut -d' ' -f1)" = "$sum" ]; then cp "$src" "$DEST/$part"; break; fi
    done
  done < <(grep -v '^#' "$DEST/packs.manifest")
  status
}

status() {
  [ -f "$DEST/packs.manifest" ] || { echo "no packs in .h200/packs"; return 0; }
  local have=0 total=0 missing=()
  while read -r _ part; do
    total=$((total + 1))
    if [ -f "$DEST/$part" ]; then have=$((have + 1)); else missing+=("$part"); fi
  done < <(grep -v '^#' "$DEST/packs.manifest")
  echo "packs: $have of $total parts in .h200/packs ($(grep -c '^# key ' "$DEST/packs.manifest") compile group(s))"
  [ ${#missing[@]} -eq 0 ] || echo "missing: ${missing[*]} (device.sh packs-out $(( 10#${missing[0]#packs.part} )))"
}

carry() {
  [ -f "$DEST/packs.manifest" ] || { echo "no packs in .h200/packs"; return 0; }
  local parts=() part
  while read -r _ part; do parts+=(".h200/packs/$part"); done < <(grep -v '^#' "$DEST/packs.manifest")
  local i
  for (( i = 0; i < ${#parts[@]}; i += 3 )); do
    printf 'stage call: carry [".h200/packs/packs.manifest"'
    printf ', "%s"' "${parts[@]:i:3}"
    printf ']\n'
  done
}

case "${1:-}" in
  collect) shift; collect "$@" ;;
  status) status ;;
  carry) carry ;;
  *) echo "usage: $0 collect DIR... | status | carry" >&2; exit 2 ;;
esac
