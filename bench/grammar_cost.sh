#!/usr/bin/env bash
# The cost of grammar-constrained sampling against a decode step, on a
# random-weight qwen2 model (151936-token vocabulary) of SIZE (default
# 0.56b, issue 15's CPU benchmark shape; written once under DIR).
#
#   bench/grammar_cost.sh [BUILD_DIR] [SIZE] [TOKENS] [THREADS]
#
# Prints grammar_cost's JSON: mask_ms_avg, accept_ms_avg, decode_ms_avg and
# ratio = (mask + accept) / decode (target <= 0.10).
set -euo pipefail
build=${1:-build}
size=${2:-0.56b}
tokens=${3:-64}
threads=${4:-0}
dir="$build/test-data/bench"
mkdir -p "$dir"
flock /tmp/vtc-build.lock cmake --build "$build" -j2 --target grammar_cost >/dev/null
exec "$build/bin/grammar_cost" "$dir/qwen2-$size-f16.gguf" --gen "$size" --tokens "$tokens" --threads "$threads"
