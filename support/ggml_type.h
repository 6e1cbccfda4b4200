// ggml tensor element types, as stored in GGUF files.
//
// The numeric values are the on-disk values of ggml's `enum ggml_type`; they
// are part of the GGUF format, so they never change. Traits (block size and
// bytes per block) come from one table in ggml_type.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace vtc {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3,
  Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20,
  IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28,
  IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35,
  MXFP4 = 39, NVFP4 = 40, Q1_0 = 41, Q2_0 = 42,
};

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;  // ggml's name: "f32", "q4_K", "iq3_s", ...
  uint32_t block_size;    // elements per block (1 for scalar types)
  uint32_t block_bytes;   // bytes per block
  bool quantized;
};

// Traits for an on-disk type value, or nullptr if the value names no known type
// (including the removed values 4, 5, 31..33 and 36..38).
const GgmlTypeTraits* find_ggml_type(uint32_t raw);
// Traits for a known type; never null.
const GgmlTypeTraits& ggml_traits(GgmlType type);
std::string_view ggml_type_name(GgmlType type);
// Case-insensitive lookup by name ("Q4_K", "q4_k", "bf16").
std::optional<GgmlType> ggml_type_from_name(std::string_view name);

// Bytes for `elements` values of `type`; nullopt if `elements` is not a whole
// number of blocks or the byte count overflows uint64.
std::optional<uint64_t> ggml_bytes_for(GgmlType type, uint64_t elements);

// Every known type, in on-disk order, for tests and tables.
const GgmlTypeTraits* ggml_type_table_begin();
const GgmlTypeTraits* ggml_type_table_end();

}  // namespace vtc
