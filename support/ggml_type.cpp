#include "support/ggml_type.h"

#include <algorithm>
#include <cctype>

namespace vtc {
namespace {

constexpr uint32_t kQK_K = 256;

// Block layouts follow ggml-common.h of the reference (see docs/gguf.md).
// Sizes: a ggml_half scale is 2 bytes; K-quant scale tables are 12 bytes.
constexpr GgmlTypeTraits kTypes[] = {
    {GgmlType::F32, "f32", 1, 4, false},
    {GgmlType::F16, "f16", 1, 2, false},
    {GgmlType::Q4_0, "q4_0", 32, 2 + 16, true},
    {GgmlType::Q4_1, "q4_1", 32, 4 + 16, true},
    {GgmlType::Q5_0, "q5_0", 32, 2 + 4 + 16, true},
    {GgmlType::Q5_1, "q5_1", 32, 4 + 4 + 16, true},
    {GgmlType::Q8_0, "q8_0", 32, 2 + 32, true},
    {GgmlType::Q8_1, "q8_1", 32, 4 + 32, true},
    {GgmlType::Q2_K, "q2_K", kQK_K, 4 + kQK_K / 16 + kQK_K / 4, true},
    {GgmlType::Q3_K, "q3_K", kQK_K, 2 + kQK_K / 4 + kQK_K / 8 + 12, true},
    {GgmlType::Q4_K, "q4_K", kQK_K, 4 + 12 + kQK_K / 2, true},
    {GgmlType::Q5_K, "q5_K", kQK_K, 4 + 12 + kQK_K / 2 + kQK_K / 8, true},
    {GgmlType::Q6_K, "q6_K", kQK_K, 2 + kQK_K / 16 + 3 * kQK_K / 4, true},
    {GgmlType::Q8_K, "q8_K", kQK_K, 4 + kQK_K + kQK_K / 16 * 2, true},
    {GgmlType::IQ2_XXS, "iq2_xxs", kQK_K, 2 + kQK_K / 8 * 2, true},
    {GgmlType::IQ2_XS, "iq2_xs", kQK_K, 2 + kQK_K / 8 * 2 + kQK_K / 32, true},
    {GgmlType::IQ3_XXS, "iq3_xxs", kQK_K, 2 + 3 * (kQK_K / 8), true},
    {GgmlType::IQ1_S, "iq1_s", kQK_K, 2 + kQK_K / 8 + kQK_K / 16, true},
    {GgmlType::IQ4_NL, "iq4_nl", 32, 2 + 16, true},
    {GgmlType::IQ3_S, "iq3_s", kQK_K, 2 + 13 * (kQK_K / 32) + kQK_K / 64, true},
    {GgmlType::IQ2_S, "iq2_s", kQK_K, 2 + kQK_K / 4 + kQK_K / 16, true},
    {GgmlType::IQ4_XS, "iq4_xs", kQK_K, 2 + 2 + kQK_K / 64 + kQK_K / 2, true},
    {GgmlType::I8, "i8", 1, 1, false},
    {GgmlType::I16, "i16", 1, 2, false},
    {GgmlType::I32, "i32", 1, 4, false},
    {GgmlType::I64, "i64", 1, 8, false},
    {GgmlType::F64, "f64", 1, 8, false},
    {GgmlType::IQ1_M, "iq1_m", kQK_K, kQK_K / 8 + kQK_K / 16 + kQK_K / 32, true},
    {GgmlType::BF16, "bf16", 1, 2, false},
    {GgmlType::TQ1_0, "tq1_0", kQK_K, 2 + kQK_K / 64 + (kQK_K - 4 * kQK_K / 64) / 5, true},
    {GgmlType::TQ2_0, "tq2_0", kQK_K, 2 + kQK_K / 4, true},
    {GgmlType::MXFP4, "mxfp4", 32, 1 + 16, true},
    {GgmlType::NVFP4, "nvfp4", 64, 4 + 32, true},
    {GgmlType::Q1_0, "q1_0", 128, 2 + 128 / 8, true},
    {GgmlType::Q2_0, "q2_0", 64, 2 + 64 / 4, true},
};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

const GgmlTypeTraits* find_ggml_type(uint32_t raw) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == raw) return &t;
  return nullptr;
}

const GgmlTypeTraits& ggml_traits(GgmlType type) {
  return *find_ggml_type(static_cast<uint32_t>(type));
}

std::string_view ggml_type_name(GgmlType type) { return ggml_traits(type).name; }

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  for (const auto& t : kTypes)
    if (iequals(t.name, name)) return t.type;
  return std::nullopt;
}

std::optional<uint64_t> ggml_bytes_for(GgmlType type, uint64_t elements) {
  const auto& t = ggml_traits(type);
  if (elements % t.block_size != 0) return std::nullopt;
  uint64_t blocks = elements / t.block_size;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(blocks, uint64_t{t.block_bytes}, &bytes)) return std::nullopt;
  return bytes;
}

const GgmlTypeTraits* ggml_type_table_begin() { return std::begin(kTypes); }
const GgmlTypeTraits* ggml_type_table_end() { return std::end(kTypes); }

}  // namespace vtc
