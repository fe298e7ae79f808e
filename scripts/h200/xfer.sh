#!/usr/bin/env bash
# Cut what a GPU sitting carries (the bundles, the compile-cache packs, the shape models) into
# chunks that each fit one device call beside the checkout, and say how each call carries them.
#
#   bash scripts/h200/xfer.sh                    # .bundles/*, .h200/packs (every key), .models
#   FARM_XFER_KEYS="6f5aeeaa8c4b45d7d5204b8d" bash scripts/h200/xfer.sh   # only these packs' keys
#   FARM_XFER_PACKS=0 bash scripts/h200/xfer.sh  # no packs (another GPU model: they would not be used)
#
# Why chunks, not the bundles' own parts: a call carries at most 64 MiB *with the checkout*
# (tracked files count), and the checkout grew past the 28 MiB that left room for a 36 MiB
# bundle part. The chunk size is what is left under 64 MiB, less a margin: one tar of everything,
# cut with split, so a chunk needs nothing but `cat`. On the machine (each call, `carry`:
# [".xfer/cNN"]; the last call also carries the code):
#
#   mkdir -p /tmp/xfer && cp .xfer/c* /tmp/xfer/                         # each call
#   cd /tmp/xfer && sha256sum -c --quiet manifest && mkdir -p /tmp/stage \
#     && cat c[0-9]* | tar -x -C /tmp/stage                             # once all arrived
#
# then the code's copy links .bundles and .h200 to /tmp/stage/... and copies .models (never a link:
# vLLM hashes the model's path into its compile cache, so a model served through a link misses the
# carried packs), and runs `scripts/h200/device.sh run` (bench/h100/README.md, "To continue").
set -euo pipefail
REPO=$(git rev-parse --show-toplevel)
cd "$REPO"
LIMIT=$(( 64 * 1024 * 1024 ))
MARGIN=$(( 2 * 1024 * 1024 ))        # the manifest, and files added to the checkout before the calls
# what travels with every call: tracked files and untracked ones git does not ignore
tree=$({ git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 stat -c %s 2>/dev/null |
       awk '{s += $1} END {print s + 0}')
chunk=$(( LIMIT - tree - MARGIN ))
if [ "$chunk" -lt $(( 8 * 1024 * 1024 )) ]; then
  echo "xfer: the checkout that travels is $(( tree / 1048576 )) MiB: under 8 MiB a call is left" >&2; exit 1
fi
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
paths=()
if ls -d .bundles/*/ >/dev/null 2>&1; then mkdir -p "$stage/.bundles"; cp -r .bundles/*/ "$stage/.bundles/"; paths+=(.bundles); fi
if [ "${FARM_XFER_PACKS:-1}" = 1 ] && [ -f .h200/packs/packs.manifest ]; then
  # the packs as packs_in (device.sh) wants them: parts of 16 MiB and a manifest, re-cut to the keys asked for
  whole=$(mktemp -d); (cd .h200/packs && cat $(grep -v '^#' packs.manifest | awk '{print $2}')) | tar -x -C "$whole"
  keys=${FARM_XFER_KEYS:-$(cd "$whole" && ls -- *.tgz | sed 's/\.tgz$//')}
  files=(); for k in $keys; do files+=("$k.tgz" "$k.json"); done
  mkdir -p "$stage/.h200/packs"
  (cd "$whole" && tar -cf - -- "${files[@]}") | (cd "$stage/.h200/packs" && split -b $(( 16 * 1024 * 1024 )) -d -a 3 - packs.part)
  (cd "$stage/.h200/packs" && { echo "# farm compile-cache packs, re-cut $(date -u +%FT%TZ) by xfer.sh: sha256 part; keys below"
                                 sha256sum packs.part*; for k in $keys; do echo "# key $k"; done; } > packs.manifest)
  rm -rf "$whole"; paths+=(.h200)
fi
if [ -d .models ]; then cp -r .models "$stage/.models"; paths+=(.models); fi
rm -rf .xfer && mkdir -p .xfer
tar -cf - -C "$stage" "${paths[@]}" | split -b "$chunk" -d -a 2 - .xfer/c
(cd .xfer && sha256sum c[0-9]* > manifest)
n=$(ls .xfer/c[0-9]* | wc -l)
echo "xfer: ${paths[*]} in $n chunk(s) of at most $(( chunk / 1048576 )) MiB (the checkout that travels: $(( tree / 1048576 )) MiB);" \
     "carry .xfer/c00 ... .xfer/c$(printf %02d $(( n - 1 ))), the manifest with the last"
