// vtc-scale-attn: attention amplification of a GGUF file (scale_attention.h).
//
//   vtc-scale-attn IN.gguf OUT.gguf [--qk G] [--vo G]
//
// Scales the softmax-attention projections of every block, q and k by G
// (default 4), v and the output projection by G (default 8), and prints how
// many tensors it scaled. Meant for synthetic files whose attention is too
// weak to show in the logits (docs/testing.md, "Attention-amplified
// llama-archs variants").
#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <string>

#include "tests/e2e/scale_attention.h"

namespace {

int usage() {
  fmt::print(stderr, "usage: vtc-scale-attn IN.gguf OUT.gguf [--qk G] [--vo G]\n"
                     "  scales attn_q/attn_k (and q/k norms, MLA q_b/k_b) by --qk (default 4) and\n"
                     "  attn_v/attn_output (and MLA v_b) by --vo (default 8); see tests/e2e/scale_attention.h\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 5 && argc != 7) return usage();
  vtc::test::AttentionGains gains;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    char* end = nullptr;
    const float g = std::strtof(argv[i + 1], &end);
    if (*end != '\0' || !(g > 0)) return usage();
    if (flag == "--qk") gains.qk = g;
    else if (flag == "--vo") gains.vo = g;
    else return usage();
  }
  try {
    const auto scaled = vtc::test::scale_attention(argv[1], argv[2], gains);
    fmt::print("{}: scaled {} attention tensors (q/k x{}, v/output x{})\n", argv[2], scaled.size(), gains.qk, gains.vo);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "vtc-scale-attn: {}\n", e.what());
    return 1;
  }
}
