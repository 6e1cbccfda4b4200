#!/usr/bin/env bash
# Installs what is missing, fetches the llama.cpp reference, builds, and runs
# the whole test suite through ctest. This is what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash tests/reference/fetch.sh >/dev/null
# llama.cpp's own model generator (test-llama-archs), built from the fetched
# source and cached by its commit: about 6 minutes once, instant afterwards.
ARCHS_BIN="$(bash tests/reference/build-archs.sh)"
bash scripts/fetch-openai.sh >/dev/null   # the openai npm client for tests/serve
bash scripts/build.sh -DVTC_REQUIRE_REFERENCE=ON -DVTC_LLAMA_ARCHS_BIN="$ARCHS_BIN"
# until-pass:2 reruns a failed test once: a real failure fails twice and
# stays red; a one-off (seen once under full load, see the issue notes)
# is reported in the output but does not sink the run.
ctest --test-dir build --output-on-failure --parallel "$(nproc)" --timeout 900 --repeat until-pass:2
