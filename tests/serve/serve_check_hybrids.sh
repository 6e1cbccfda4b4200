#!/usr/bin/env bash
# serve_check_hybrids.sh VTC DATA_DIR SERVE_CHECK: scripts/serve-check.sh
# with SERVE_CHECK_PREFIX=1 on the state space and hybrid models vtc
# generates (tiny, f32, seed 42: mamba2, jamba, lfm2, nemotron_h, qwen35), on the
# CPU target: 8 concurrent greedy completions equal their solo runs, with
# the prompts sharing a preamble. Their recurrent state summarizes the
# whole prefix, so they resume only from a checkpoint taken at a prompt's
# deepest shareable page (docs/serving.md, "Prefix reuse"). Both servers
# must reuse prompt tokens, as the tiny llama control does: the reference
# server, which reads each prompt once, where a prompt's checkpoint lies
# inside the preamble (its first 64 tokens on these vocabularies), the
# checked server also on its second reading of each prompt (solo, then
# concurrently), the concurrent texts still equal to the solo ones and the
# reference's. Exit 1 on any failure.
set -uo pipefail
VTC=$1 DATA=$2 CHECK=$3
mkdir -p "$DATA"
status=0
for arch in llama mamba2 jamba lfm2 nemotron_h qwen35; do
  model="$DATA/tiny-$arch.gguf"  # the file test_serve's tiny_model_of(arch) writes, byte for byte
  if [[ ! -f $model ]]; then
    "$VTC" gen-model --arch "$arch" --size tiny --seed 42 -q -o "$model.$$.gguf" && mv "$model.$$.gguf" "$model" ||
      { echo "serve-check-hybrids: gen-model --arch $arch failed"; exit 1; }
  fi
  out=$(SERVE_CHECK_PREFIX=1 bash "$CHECK" "$VTC" "$model" cpu 2>&1)
  rc=$?
  echo "$out" | sed "s/^/[$arch] /"
  reused=$(echo "$out" | sed -n 's/.*prefix cache: cpu server \([0-9]*\), cpu server \([0-9]*\)$/\1 \2/p')
  verdict=PASS
  [[ $rc == 0 ]] || verdict="FAIL (serve-check exit $rc)"
  if [[ -z $reused || $reused == *" 0" || $reused == "0 "* ]]; then
    [[ $arch == llama ]] && verdict="FAIL (the control reused no prompt tokens: '$reused')" ||
      verdict="FAIL (a server reused no prompt tokens through checkpoints: '$reused')"
  fi
  [[ $verdict == PASS ]] || status=1
  echo "serve-check-hybrids: $arch: $verdict"
done
exit $status
