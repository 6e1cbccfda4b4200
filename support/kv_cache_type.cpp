#include "support/kv_cache_type.h"

#include <cstdlib>

#include <fmt/format.h>

#include "support/error.h"

namespace vtc {

namespace {

constexpr GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,   GgmlType::Q8_0, GgmlType::Q4_0,
                               GgmlType::Q4_1, GgmlType::IQ4_NL, GgmlType::Q5_0, GgmlType::Q5_1};

bool rotation_disabled() {
  const char* v = std::getenv("VTC_ATTN_ROT_DISABLE");
  return v != nullptr && std::atoi(v) != 0;
}

}  // namespace

std::span<const GgmlType> kv_cache_types() { return kTypes; }

bool is_kv_cache_type(GgmlType type) {
  for (GgmlType t : kTypes)
    if (t == type) return true;
  return false;
}

std::string kv_cache_type_list() {
  std::string out;
  for (GgmlType t : kTypes) out += fmt::format("{}{}", out.empty() ? "" : ", ", ggml_type_name(t));
  return out;
}

GgmlType parse_kv_cache_type(std::string_view name, std::string_view flag) {
  const auto t = ggml_type_from_name(name);
  if (!t || !is_kv_cache_type(*t))
    throw Error(fmt::format("{} {}: not a KV cache type (one of: {})", flag, name, kv_cache_type_list()));
  return *t;
}

int64_t kv_rotation_block(GgmlType type, int64_t head_dim, bool is_v) {
  if (!ggml_traits(type).quantized || head_dim <= 0 || head_dim % 64 != 0 || rotation_disabled()) return 0;
  if (is_v) return 64;
  int64_t n = 64;
  while (head_dim % (2 * n) == 0) n *= 2;
  return n;
}

}  // namespace vtc
