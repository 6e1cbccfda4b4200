#!/usr/bin/env bash
# Installs the official `openai` and `@anthropic-ai/sdk` npm clients used by
# the server tests (tests/serve/openai_client_test.sh, responses_client_test.sh,
# anthropic_messages_test.sh) into a cache dir.
#
#   scripts/fetch-openai.sh [CACHE_DIR]
#
# CACHE_DIR defaults to $VTC_OPENAI_CACHE, then $HOME/.cache/vtc/openai-npm.
# Idempotent: npm runs only when a pinned version is missing. Prints the
# cache dir on stdout.
set -euo pipefail

# openai 7 declares node >= 22 but runs on Debian 12's node 20 (npm warns).
PACKAGES=("openai@7.59.0" "@anthropic-ai/sdk@1.16.0")
CACHE="${1:-${VTC_OPENAI_CACHE:-$HOME/.cache/vtc/openai-npm}}"
log() { echo "fetch-openai.sh: $*" >&2; }

mkdir -p "$CACHE"
CACHE="$(cd "$CACHE" && pwd)"
missing=()
for spec in "${PACKAGES[@]}"; do
  name="${spec%@*}" version="${spec##*@}"
  pkg="$CACHE/node_modules/$name/package.json"
  have=""
  [[ -f "$pkg" ]] && have="$(node -e 'process.stdout.write(require(process.argv[1]).version)' "$pkg" 2>/dev/null || true)"
  if [[ "$have" == "$version" ]]; then log "$spec already installed"; else missing+=("$spec"); fi
done
if (( ${#missing[@]} )); then
  command -v npm >/dev/null || { log "npm not found; install Node.js"; exit 1; }
  log "installing ${missing[*]} into $CACHE"
  [[ -f "$CACHE/package.json" ]] || echo '{"name":"vtc-openai-client","private":true}' > "$CACHE/package.json"
  (cd "$CACHE" && npm i --no-audit --no-fund "${PACKAGES[@]}" >&2)
fi
echo "$CACHE"
