#!/usr/bin/env bash
# Download the ShareGPT file the seed's `sharegpt` profile uses, onto this node.
# Usage: scripts/fetch-sharegpt.sh [DIR]   (default: $FARM_DATA_DIR, else ~/datasets)
# Run it on every GPU node: datasets live on the nodes, at the path the study names
# (`${FARM_DATA_DIR}/ShareGPT_V3_unfiltered_cleaned_split.json`).
set -euo pipefail
dir="${1:-${FARM_DATA_DIR:-$HOME/datasets}}"
name=ShareGPT_V3_unfiltered_cleaned_split.json
url="https://huggingface.co/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered/resolve/main/$name"
mkdir -p "$dir"
if [ -s "$dir/$name" ]; then
  echo "already there: $dir/$name"
  exit 0
fi
curl -fL --retry 3 -o "$dir/$name.part" "$url"
mv "$dir/$name.part" "$dir/$name"
echo "downloaded: $dir/$name (export FARM_DATA_DIR=$dir)"
