#!/usr/bin/env bash
# Configures (once) and builds vtc with Ninja into ./build.
# Extra arguments go to cmake at configure time.
set -euo pipefail
cd "$(dirname "$0")/.."
REF_DIR="${VTC_REF_CACHE:-$HOME/.cache/vtc/llama-ref}"
if [[ ! -f build/build.ninja ]]; then
  cmake --preset default -DVTC_REFERENCE_DIR="$REF_DIR" "$@"
else
  cmake build -DVTC_REFERENCE_DIR="$REF_DIR" "$@" >/dev/null
fi
cmake --build build --parallel "$(nproc)"
