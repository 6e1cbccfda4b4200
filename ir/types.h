// IR types: element type x shape x placement.
//
// Every value has a TensorType. Placement is part of the type on purpose:
// it lets the verifier reject a host op reading a device-produced value
// without an explicit to_host (the seed bug in DESIGN.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dim.h"
#include "support/ggml_type.h"
#include "support/weight_layout.h"

namespace vtc::ir {

enum class Placement : uint8_t { Host, Device };
std::string_view placement_name(Placement p);
std::optional<Placement> placement_from_name(std::string_view name);

// Activation element types, plus every GGUF block-quant type for weights.
// A quantized type also says how its blocks are arranged in memory
// (support/weight_layout.h): Rows, ggml's own, unless the weight-layout
// pass chose another for the target's kernels. The layout is part of the
// type: q4_k and q4_k_x8 are different types.
class ElemType {
 public:
  enum Kind : uint8_t { F32, F16, BF16, I32, I64, U8, Quant };
  ElemType() = default;
  ElemType(Kind kind) : kind_(kind) {}  // NOLINT: scalar kinds convert implicitly
  // Throws vtc::Error if `type` cannot be stored in `layout`
  // (weight_layout_supports).
  static ElemType quant(GgmlType type, WeightLayout layout = WeightLayout::Rows);

  Kind kind() const { return kind_; }
  GgmlType quant_type() const { return quant_; }
  // Rows for every non-quantized type.
  WeightLayout layout() const { return layout_; }
  // The same type in another layout. Throws vtc::Error for a non-Rows
  // layout on a non-quantized type or a type the layout does not support.
  ElemType with_layout(WeightLayout layout) const;
  bool is_float() const { return kind_ == F32 || kind_ == F16 || kind_ == BF16; }
  bool is_integer() const { return kind_ == I32 || kind_ == I64 || kind_ == U8; }
  bool is_quant() const { return kind_ == Quant; }

  // Bytes per element of a scalar type; 0 for quantized types (whose size
  // is per block: see ggml_bytes_for).
  int64_t scalar_bytes() const;

  // Lowercase name: f32 ... u8, q4_k, iq2_xxs, ...; a layout other than
  // Rows adds "_" and its name: q4_k_x8.
  std::string name() const;
  // Scalar names first, then quantized GGUF types by ggml name (any case),
  // optionally with a layout suffix the type supports ("q4_k_x8"; not
  // "q5_1_x8" or "q4_k_rows").
  static std::optional<ElemType> from_name(std::string_view name);
  // Why from_name rejects `name`, for a parser's message: names a layout
  // suffix on a type without that layout, else "unknown element type".
  static std::string unknown_name_reason(std::string_view name);

  friend bool operator==(ElemType a, ElemType b) {
    return a.kind_ == b.kind_ && (a.kind_ != Quant || (a.quant_ == b.quant_ && a.layout_ == b.layout_));
  }

 private:
  Kind kind_ = F32;
  GgmlType quant_ = GgmlType::F32;
  WeightLayout layout_ = WeightLayout::Rows;
};

using Shape = std::vector<Dim>;
std::string shape_str(const Shape& shape);  // "T x 4096" ("" for rank 0)

struct TensorType {
  ElemType elem;
  Shape shape;
  Placement placement = Placement::Device;

  size_t rank() const { return shape.size(); }
  std::string str() const;  // tensor<T x 4096 x f32, device>
  friend bool operator==(const TensorType& a, const TensorType& b) {
    return a.elem == b.elem && a.shape == b.shape && a.placement == b.placement;
  }
};

// How the state store indexes a persistent buffer.
enum class StateKind : uint8_t { Ring, Paged, Plain };
std::string_view state_kind_name(StateKind k);
std::optional<StateKind> state_kind_from_name(std::string_view name);

}  // namespace vtc::ir
