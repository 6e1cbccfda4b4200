#!/usr/bin/env bash
# Fetches the llama.cpp reference used by vtc's correctness tests.
#
#   tests/reference/fetch.sh [CACHE_DIR]
#
# CACHE_DIR defaults to $VTC_REF_CACHE, then $HOME/.cache/vtc/llama-ref.
# Idempotent: the pinned npm packages are installed only when missing (or at a
# different version) and the source bundle is cloned only once. Prints the
# cache dir on stdout; pass it to cmake as -DVTC_REFERENCE_DIR=<dir>.
#
# Result layout:
#   <dir>/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/  prebuilt libllama + libggml*
#   <dir>/node_modules/node-llama-cpp/llama/gitRelease.bundle     llama.cpp source (git bundle)
#   <dir>/llama.cpp/                                              that bundle, cloned
set -euo pipefail

NLC_VERSION=3.21.1
CACHE="${1:-${VTC_REF_CACHE:-$HOME/.cache/vtc/llama-ref}}"

log() { echo "fetch.sh: $*" >&2; }

mkdir -p "$CACHE"
CACHE="$(cd "$CACHE" && pwd)"

installed_version() {
  local pkg="$CACHE/node_modules/$1/package.json"
  [[ -f "$pkg" ]] || return 0
  node -e 'process.stdout.write(require(process.argv[1]).version)' "$pkg" 2>/dev/null || true
}

BINS="$CACHE/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
if [[ "$(installed_version node-llama-cpp)" == "$NLC_VERSION" &&
      "$(installed_version @node-llama-cpp/linux-x64)" == "$NLC_VERSION" &&
      -f "$BINS/libllama.v0.4.0.so" ]]; then
  log "npm packages $NLC_VERSION already installed"
else
  command -v npm >/dev/null || { log "npm not found; install Node.js"; exit 1; }
  log "installing node-llama-cpp@$NLC_VERSION into $CACHE"
  [[ -f "$CACHE/package.json" ]] || echo '{"name":"vtc-llama-ref","private":true}' > "$CACHE/package.json"
  # --ignore-scripts: we only need the files, not node-llama-cpp's postinstall build.
  (cd "$CACHE" && npm i --no-audit --no-fund --ignore-scripts --omit=optional \
      "node-llama-cpp@$NLC_VERSION" "@node-llama-cpp/linux-x64@$NLC_VERSION" >&2)
fi
[[ -f "$BINS/libllama.v0.4.0.so" ]] || { log "missing $BINS/libllama.v0.4.0.so after install"; exit 1; }

BUNDLE="$CACHE/node_modules/node-llama-cpp/llama/gitRelease.bundle"
SRC="$CACHE/llama.cpp"
if [[ -f "$SRC/include/llama.h" ]]; then
  log "llama.cpp source already cloned"
else
  [[ -f "$BUNDLE" ]] || { log "missing $BUNDLE"; exit 1; }
  rm -rf "$SRC.tmp"
  git -c advice.detachedHead=false clone --quiet "$BUNDLE" "$SRC.tmp" >&2
  rm -rf "$SRC"
  mv "$SRC.tmp" "$SRC"
  log "cloned llama.cpp source into $SRC"
fi

echo "$CACHE"
