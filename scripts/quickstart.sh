#!/usr/bin/env bash
# Quick start: install what is missing, build vtc, generate the default
# synthetic model (tiny llama with the reference's real SPM vocab), and run
# vtc's main job on it: inspect the file, then generate from a prompt on the
# CPU interpreter. (Random weights: the text is gibberish, the machinery is
# real.) `vtc compile` and `vtc serve` join this as they land.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash tests/reference/fetch.sh >/dev/null   # real vocabularies come from the llama.cpp reference
bash scripts/build.sh
mkdir -p models
./build/tools/vtc/vtc gen-model --arch llama --size tiny --seed 42 -o models/vtc-tiny-llama.gguf
./build/tools/vtc/vtc inspect models/vtc-tiny-llama.gguf
./build/tools/vtc/vtc run models/vtc-tiny-llama.gguf -p "Once upon a time" -n 32 --temp 0
