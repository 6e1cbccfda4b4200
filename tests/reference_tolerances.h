// Tolerances for comparing vtc against the llama.cpp reference, shared by
// every test that does. Logits are compared per position by relative L2:
// ||a - b|| / ||b||.
#pragma once

#include <cmath>
#include <vector>

namespace vtc::test {

// f32 and f16 models: the two arms differ only by float reassociation.
inline constexpr double kLogitsRelL2Tolerance = 1e-3;
// Quantized models, compared on the same file with the closer of the
// reference's two CPU kernel paths (docs/numerics-parity.md).
inline constexpr double kQuantLogitsRelL2Tolerance = 1e-2;

inline double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / (norm > 0 ? norm : 1));
}

}  // namespace vtc::test
