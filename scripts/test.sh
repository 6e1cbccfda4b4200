#!/usr/bin/env bash
# Installs what is missing, fetches the llama.cpp reference, builds, and runs
# the whole test suite through ctest. This is what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash tests/reference/fetch.sh >/dev/null
bash scripts/build.sh -DVTC_REQUIRE_REFERENCE=ON
ctest --test-dir build --output-on-failure --parallel "$(nproc)" --timeout 900
