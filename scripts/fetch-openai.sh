#!/usr/bin/env bash
# Installs the official `openai` npm client used by the server tests
# (tests/serve/openai_client_test.sh) into a cache dir.
#
#   scripts/fetch-openai.sh [CACHE_DIR]
#
# CACHE_DIR defaults to $VTC_OPENAI_CACHE, then $HOME/.cache/vtc/openai-npm.
# Idempotent: npm runs only when the pinned version is missing. Prints the
# cache dir on stdout.
set -euo pipefail

OPENAI_VERSION=4.95.0
CACHE="${1:-${VTC_OPENAI_CACHE:-$HOME/.cache/vtc/openai-npm}}"
log() { echo "fetch-openai.sh: $*" >&2; }

mkdir -p "$CACHE"
CACHE="$(cd "$CACHE" && pwd)"
pkg="$CACHE/node_modules/openai/package.json"
have=""
[[ -f "$pkg" ]] && have="$(node -e 'process.stdout.write(require(process.argv[1]).version)' "$pkg" 2>/dev/null || true)"
if [[ "$have" == "$OPENAI_VERSION" ]]; then
  log "openai@$OPENAI_VERSION already installed"
else
  command -v npm >/dev/null || { log "npm not found; install Node.js"; exit 1; }
  log "installing openai@$OPENAI_VERSION into $CACHE"
  [[ -f "$CACHE/package.json" ]] || echo '{"name":"vtc-openai-client","private":true}' > "$CACHE/package.json"
  (cd "$CACHE" && npm i --no-audit --no-fund "openai@$OPENAI_VERSION" >&2)
fi
echo "$CACHE"
