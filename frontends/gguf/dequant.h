// Dequantization of ggml block-quantized data to f32.
//
// One function per type, each a direct reading of the block layout in
// ggml-common.h of the reference; results are bit-exact with the reference's
// `to_float` (tests/quant checks this on data quantized by the reference).
#pragma once

#include <cstdint>

#include "support/ggml_type.h"

namespace vtc {

// True if dequantize_row supports `type`.
bool can_dequantize(GgmlType type);

// Dequantizes `n` values (a whole number of blocks) from `src` into `dst`.
// Throws vtc::Error for an unsupported type or a partial block.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

// IEEE half and bfloat16 conversions, exact.
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even, NaN kept quiet

}  // namespace vtc
