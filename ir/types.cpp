#include "ir/types.h"

#include <cctype>

#include "support/error.h"

namespace vtc::ir {

int64_t ElemType::scalar_bytes() const {
  switch (kind_) {
    case F32: case I32: return 4;
    case F16: case BF16: return 2;
    case I64: return 8;
    case U8: return 1;
    case Quant: return 0;
  }
  return 0;
}

std::string_view placement_name(Placement p) { return p == Placement::Host ? "host" : "device"; }

std::optional<Placement> placement_from_name(std::string_view name) {
  if (name == "host") return Placement::Host;
  if (name == "device") return Placement::Device;
  return std::nullopt;
}

ElemType ElemType::quant(GgmlType type, WeightLayout layout) {
  ElemType t(Quant);
  t.quant_ = type;
  return t.with_layout(layout);
}

ElemType ElemType::with_layout(WeightLayout layout) const {
  if (layout != WeightLayout::Rows && (kind_ != Quant || !weight_layout_supports(layout, quant_)))
    throw Error("element type " + name() + " has no " + std::string(weight_layout_name(layout)) + " layout");
  ElemType t = *this;
  t.layout_ = layout;
  return t;
}

namespace {
constexpr std::string_view kScalarNames[] = {"f32", "f16", "bf16", "i32", "i64", "u8"};
}

std::string ElemType::name() const {
  if (kind_ != Quant) return std::string(kScalarNames[kind_]);
  std::string n(ggml_type_name(quant_));
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (layout_ != WeightLayout::Rows) n += "_" + std::string(weight_layout_name(layout_));
  return n;
}

namespace {
// "q4_k_x8" -> (q4_k, x8): a quantized ggml name and a non-Rows layout
// suffix; nullopt when `name` has no such suffix.
struct LayoutSuffix {
  GgmlType type;
  WeightLayout layout;
};
std::optional<LayoutSuffix> split_layout_suffix(std::string_view name) {
  const size_t us = name.rfind('_');
  if (us == std::string_view::npos) return std::nullopt;
  std::string suffix(name.substr(us + 1));
  for (char& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto layout = weight_layout_from_name(suffix);
  if (!layout || *layout == WeightLayout::Rows) return std::nullopt;
  auto g = ggml_type_from_name(name.substr(0, us));
  if (!g || !ggml_traits(*g).quantized) return std::nullopt;
  return LayoutSuffix{*g, *layout};
}
}  // namespace

std::optional<ElemType> ElemType::from_name(std::string_view name) {
  for (int k = F32; k <= U8; ++k)
    if (name == kScalarNames[k]) return ElemType(static_cast<Kind>(k));
  auto g = ggml_type_from_name(name);
  if (g && ggml_traits(*g).quantized) return quant(*g);
  if (auto s = split_layout_suffix(name); s && weight_layout_supports(s->layout, s->type)) return quant(s->type, s->layout);
  return std::nullopt;
}

std::string ElemType::unknown_name_reason(std::string_view name) {
  if (auto s = split_layout_suffix(name); s && !weight_layout_supports(s->layout, s->type)) {
    std::string supported;
    for (auto* t = ggml_type_table_begin(); t != ggml_type_table_end(); ++t)
      if (t->quantized && weight_layout_supports(s->layout, t->type))
        supported += (supported.empty() ? "" : ", ") + quant(t->type).name();
    return "element type '" + std::string(name) + "': " + quant(s->type).name() + " weights have no " +
           std::string(weight_layout_name(s->layout)) + " layout (it is for " + supported + ")";
  }
  return "unknown element type '" + std::string(name) + "'";
}

std::string shape_str(const Shape& shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? " x " : "") + shape[i].str();
  return out;
}

std::string TensorType::str() const {
  std::string dims = shape_str(shape);
  return "tensor<" + dims + (dims.empty() ? "" : " x ") + elem.name() + ", " +
         std::string(placement_name(placement)) + ">";
}

std::string_view state_kind_name(StateKind k) {
  switch (k) {
    case StateKind::Ring: return "ring";
    case StateKind::Paged: return "paged";
    case StateKind::Plain: return "plain";
  }
  return "?";
}

std::optional<StateKind> state_kind_from_name(std::string_view name) {
  for (auto k : {StateKind::Ring, StateKind::Paged, StateKind::Plain})
    if (state_kind_name(k) == name) return k;
  return std::nullopt;
}

}  // namespace vtc::ir
