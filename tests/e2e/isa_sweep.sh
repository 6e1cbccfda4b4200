#!/usr/bin/env bash
# The differential tests against llama.cpp once more under every CPU kernel
# level this machine runs other than the one the rest of ctest uses (issue
# 31: "keep passing on every ISA the machine has"). For each level from
# `vtc bench --list-isas` (scalar, avx2, avxvnni, avx512vnni, avx512bf16;
# not the one marked "used"), with VTC_CPU_ISA set to it:
#   - test_llama_archs "*match llama.cpp*": every llama-archs model, f32 and
#     q8_0, logits and greedy tokens against the reference;
#   - test_e2e: the dense models (f32, f16, bf16, q8_0, q4_k_m ...) and the
#     [families] (not the hidden ones) against the reference.
# A level failing one of them fails the test, naming the level. On a
# machine with one SIMD level only there is nothing to sweep: SKIPPED (77).
# scalar is not swept: its float order is that of the reference's builds
# without FMA (x64, sse42; docs/numerics-parity.md), and the reference
# loaded here is the machine's best build, so q8_0 logits differ by up to
# ~1.4e-2 (measured; tolerance 1e-2) with identical greedy tokens. The
# kernel tests (test_cpu_kernels) compare every SIMD kernel with scalar.
# Where the level used is avx512bf16, avx512vnni is not swept: the two
# levels' tables differ in the bf16 slot alone (isa.cpp; test_cpu_kernels
# "...differs from AVX-512 VNNI in the bf16 kernels alone" fails if that
# stops being true), so every test but the bf16 models' would repeat the
# used level's run kernel for kernel, and the bf16 models' skips there
# (avx512vnni's bf16 dot cannot sum in the order of the reference's
# AVX512-BF16 build; test_cpu_kernels checks it against scalar).
#   tests/e2e/isa_sweep.sh VTC TEST_E2E [TEST_LLAMA_ARCHS]
set -uo pipefail
VTC="$1" E2E="$2" ARCHS="${3:-}"
isas=$(env -u VTC_CPU_ISA "$VTC" bench --list-isas)
levels=$(awk '$1 != "scalar" && $2 != "(used:" { print $1 }' <<<"$isas")
used=$(awk '$2 == "(used:" { print $1 }' <<<"$isas")
[[ -n "$levels" ]] || { echo "SKIPPED: this machine runs one SIMD kernel level only; the rest of ctest covers it"; exit 77; }
failed=()
bf16_models="bf16 dense models match llama.cpp logits and greedy tokens"
for level in $levels; do
  echo "=== VTC_CPU_ISA=$level"
  if [[ $level == avx512vnni && $used == avx512bf16 ]]; then
    echo "not swept: its kernels are avx512bf16's but for bf16, whose reference test skips under it"
    continue
  fi
  if [[ -n "$ARCHS" ]]; then
    VTC_CPU_ISA=$level "$ARCHS" --warn NoTests "*match llama.cpp*" || failed+=("$level: test_llama_archs")
  fi
  # One Catch2 spec (commas: or); --warn NoTests fails a spec that matches nothing.
  VTC_CPU_ISA=$level "$E2E" --warn NoTests "f32 and f16 dense models match llama.cpp logits and greedy tokens,$bf16_models,quantized dense models match llama.cpp on the same file,[families]~[.]" \
    || failed+=("$level: test_e2e")
done
if (( ${#failed[@]} )); then
  printf 'isa-sweep: FAILED under %s\n' "${failed[@]}"
  exit 1
fi
echo "isa-sweep: every level passed: $(echo $levels)"
