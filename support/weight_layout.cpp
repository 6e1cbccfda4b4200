#include "support/weight_layout.h"

namespace vtc {

std::string_view weight_layout_name(WeightLayout layout) {
  switch (layout) {
    case WeightLayout::Rows: return "rows";
    case WeightLayout::Interleaved8: return "x8";
  }
  return "?";
}

std::optional<WeightLayout> weight_layout_from_name(std::string_view name) {
  if (name == "rows") return WeightLayout::Rows;
  if (name == "x8") return WeightLayout::Interleaved8;
  return std::nullopt;
}

int64_t weight_layout_rows(WeightLayout layout) { return layout == WeightLayout::Interleaved8 ? 8 : 1; }

bool weight_layout_supports(WeightLayout layout, GgmlType type) {
  switch (layout) {
    case WeightLayout::Rows: return true;
    case WeightLayout::Interleaved8: return type == GgmlType::Q4_0 || type == GgmlType::Q8_0 || type == GgmlType::Q4_K || type == GgmlType::Q6_K;
  }
  return false;
}

}  // namespace vtc
