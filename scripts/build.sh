#!/usr/bin/env bash
# Configures (once) and builds vtc with Ninja into ./build.
#
#   scripts/build.sh [--target T]... [-DVAR=VALUE]...
#
# --target builds only T (and what it needs), e.g. `--target vtc` for the
# quick start; without it, everything (vtc, its tests, the reference
# tools). Other arguments go to cmake at configure time.
set -euo pipefail
cd "$(dirname "$0")/.."
REF_DIR="${VTC_REF_CACHE:-$HOME/.cache/vtc/llama-ref}"
targets=()
cmake_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --target) targets+=(--target "$2"); shift 2 ;;
    *) cmake_args+=("$1"); shift ;;
  esac
done
if [[ ! -f build/build.ninja ]]; then
  cmake --preset default -DVTC_REFERENCE_DIR="$REF_DIR" "${cmake_args[@]}"
else
  cmake build -DVTC_REFERENCE_DIR="$REF_DIR" "${cmake_args[@]}" >/dev/null
fi
cmake --build build --parallel "$(nproc)" "${targets[@]}"
