// AVX-512 kernels (placeholder: this level has no kernel of this kind yet;
// the table keeps the level below's).
#include <immintrin.h>

#include "runtime/cpu/kernels/internal.h"

namespace vtc::cpu::detail {

void add_avx512_x8_kernels(QuantKernels&) {}

}  // namespace vtc::cpu::detail
