#!/usr/bin/env bash
# Builds llama.cpp's own model generator, tests/test-llama-archs, from the
# reference's source bundle (cloned by tests/reference/fetch.sh).
#
#   tests/reference/build-archs.sh [REF_CACHE_DIR]
#
# test-llama-archs writes random-weight GGUF models of every architecture,
# with every optional tensor, through llama.cpp's own loader and saver: the
# files our users hold are written that way, not by our generator.
#
# The build (libllama, ggml, common: about 6 minutes on 2 cores at -O1) is cached
# under <cache>/archs-build/<bundle commit>, so a machine pays it once per
# reference release. It fails loudly: a broken build is an error, never a
# silently skipped test. Prints the binary's path on stdout.
set -euo pipefail

CACHE="${1:-${VTC_REF_CACHE:-$HOME/.cache/vtc/llama-ref}}"
SRC="$CACHE/llama.cpp"
log() { echo "build-archs.sh: $*" >&2; }

[[ -f "$SRC/tests/test-llama-archs.cpp" ]] || { log "no reference source in $SRC; run tests/reference/fetch.sh first"; exit 1; }
COMMIT="$(git -C "$SRC" rev-parse HEAD)"
OUT="$CACHE/archs-build/$COMMIT"
BIN="$OUT/bin/test-llama-archs"

if [[ -x "$BIN" ]] && "$BIN" --help >/dev/null 2>&1; then
  log "test-llama-archs already built for $COMMIT"
  echo "$BIN"
  exit 0
fi

log "building test-llama-archs from $SRC ($COMMIT) into $OUT"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
rm -rf "$OUT.tmp"
# -O1: this build writes model files (test-llama-archs) and renders and
# parses chat text (vtc-chat-ref links its libllama-common); neither runs
# the reference's kernels on a test's hot path (the logits come from the
# prebuilt npm libraries), and -O1 compiles about a third faster than -O3.
cmake -S "$SRC" -B "$OUT.tmp" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=ON \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_APP=OFF \
  -DBUILD_SHARED_LIBS=OFF "${launcher[@]}" >&2
cmake --build "$OUT.tmp" --target test-llama-archs --parallel "$(nproc)" >&2
[[ -x "$OUT.tmp/bin/test-llama-archs" ]] || { log "the build produced no bin/test-llama-archs"; exit 1; }
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
log "built $BIN"
echo "$BIN"
