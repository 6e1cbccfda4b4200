#!/usr/bin/env bash
# cluster-check.sh VTC [WORK_DIR]: 3 `vtc serve` replicas of a tiny generated
# model behind HAProxy (deploy/haproxy.cfg) on loopback, under 300 mixed
# requests 16 at a time, without and with faults (one replica SIGKILLed,
# another drained by SIGTERM and started again), then prefix-affine against
# least-connections routing on 8 shared system prompts. Prints the counts,
# latencies and hit rates; exit 0 when everything expected holds, 1
# otherwise, 77 (SKIPPED, with the reason) without haproxy, node or the
# llama.cpp vocabulary the model generator needs. The checks and the
# figures: scripts/cluster_check.mjs; docs/serving.md, "Running more than
# one replica".
set -euo pipefail
VTC=$1
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${2:-$(mktemp -d)}"
command -v haproxy >/dev/null || { echo "SKIPPED: haproxy is not installed (apt-get install haproxy; scripts/install-deps.sh)"; exit 77; }
command -v node >/dev/null || { echo "SKIPPED: node is not installed"; exit 77; }
VOCAB="${VTC_REF_CACHE:-$HOME/.cache/vtc/llama-ref}/llama.cpp/models/ggml-vocab-llama-spm.gguf"
[[ -f "$VOCAB" ]] || { echo "SKIPPED: the llama.cpp reference (vocab) is not fetched; run tests/reference/fetch.sh"; exit 77; }
mkdir -p "$WORK"
rm -f "$WORK"/*.log
MODEL="$WORK/cluster-tiny-llama.gguf"
[[ -f "$MODEL" ]] || { "$VTC" gen-model --arch llama --size tiny --seed 42 -q -o "$MODEL.$$.gguf" && mv "$MODEL.$$.gguf" "$MODEL"; }
echo "cluster-check: $(haproxy -v | head -1)"
# A pass is exit 0 and the verdict line, so a run that ends early never passes.
status=0
node "$ROOT/scripts/cluster_check.mjs" "$VTC" "$MODEL" "$ROOT/deploy/haproxy.cfg" "$WORK" | tee "$WORK/cluster-check.out" ||
  status=1
[[ $status == 0 ]] && ! grep -qx 'cluster-check: PASS' "$WORK/cluster-check.out" && { echo "cluster-check: FAIL: no verdict (see $WORK)"; status=1; }
exit $status
