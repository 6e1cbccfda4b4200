// The element types a KV cache may hold (llama.cpp's -ctk / -ctv), and the
// rule that says when the reference rotates K or V before quantizing them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "support/ggml_type.h"

namespace vtc {

// f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1: the cache types
// llama.cpp's common arguments accept (kv_cache_types in common/arg.cpp), in
// that order.
std::span<const GgmlType> kv_cache_types();
bool is_kv_cache_type(GgmlType type);
// "f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1", for messages and --help.
std::string kv_cache_type_list();
// The cache type named `name` (any case). Throws vtc::Error naming `flag`,
// the name and the accepted list.
GgmlType parse_kv_cache_type(std::string_view name, std::string_view flag);

// llama.cpp (src/llama-kv-cache.cpp, since PR #21038) rotates K (with q) and
// V (and the attention output back) by a Walsh-Hadamard matrix when that
// cache half holds a block-quantized type and the head size is a multiple of
// 64; LLAMA_ATTN_ROT_DISABLE=1 turns it off there, VTC_ATTN_ROT_DISABLE=1 here.
// The rotation's block size, or 0 for none: K uses the largest power of two
// (64 or more) dividing the head size, V always 64.
int64_t kv_rotation_block(GgmlType type, int64_t head_dim, bool is_v);

}  // namespace vtc
