// Attention amplification of a GGUF file (vtc-scale-attn, and the
// attention-amplified llama-archs variants of llama_archs.h).
//
// Why: in llama.cpp's test-llama-archs files, even rescaled (llama_archs.h),
// attention barely moves the logits (zeroing every attn_output moves llama's
// by 4.7e-3 rel-L2), so an attention or rope bug hides under a 1e-3
// tolerance. Scaling the softmax-attention projections makes the scores and
// the attention output large enough to matter.
//
// What is scaled, by the tensor's name (blk.N.<base>.weight; biases are
// left as they are: the weights are what make attention weak, and scaling
// the biases too made the scores so sharp that vtc's CPU and llama.cpp, which
// round q and the accumulator to f16 at the same points, drifted to 1.5e-3
// apart on command-r from reassociation alone):
//   q and k gain (default 4): attn_q, attn_k, attn_q_norm and attn_k_norm
//     (a norm after the projection would cancel the projection's gain; its
//     gain carries it); MLA's attn_q_b, attn_k_b (absorbed into the query,
//     so the non-rotary scores get both gains) and attn_kv_a_mqa (its
//     rotary k_pe part; the latent part is normalized again), so both
//     parts of an MLA score grow by qk^2 as in the other architectures;
//   v and output gain (default 8): attn_v, attn_v_b (MLA), attn_output;
//   attn_qkv (fused): its q and k rows by the q/k gain, its v rows by the v
//     gain, the split read from the file's head counts and head sizes; in a
//     block with ssm_* tensors (a DeltaNet layer's attn_qkv feeds its
//     convolution, not a softmax) it is left alone.
// Everything else, metadata included, is copied unchanged.
//
// Types: F32, F16 and BF16 element by element. Block-quantized types
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS, MXFP4) only
// with power-of-two gains: their block scales (and mins) are multiplied, or
// MXFP4's shared exponent raised, which scales every dequantized value by
// exactly the gain. Any other type, a gain that is not a power of two on a
// quantized tensor, or a scale that overflows f16 throws vtc::Error naming
// the tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/ggml_type.h"

namespace vtc::test {

struct AttentionGains {
  float qk = 4.0f;  // attn_q, attn_k (and their norms, MLA's q_b and k_b)
  float vo = 8.0f;  // attn_v, attn_output (and MLA's v_b)
};

// Which gain a tensor of this name gets.
enum class AttentionPart { kNone, kQK, kVO, kQKV };
AttentionPart attention_part(const std::string& tensor_name);

// Multiplies `n_elements` values of `type` stored at `data` (whole blocks)
// by `gain` in place, as described above; `name` is for errors.
void scale_values(GgmlType type, uint8_t* data, uint64_t n_elements, float gain, const std::string& name);

// Reads `in`, scales its attention tensors and writes `out`. Returns the
// names of the tensors it scaled.
std::vector<std::string> scale_attention(const std::string& in, const std::string& out,
                                         const AttentionGains& gains = {});

}  // namespace vtc::test
