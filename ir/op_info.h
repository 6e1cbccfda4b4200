// Op kinds and their static descriptions, generated from ops.def.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attr.h"

namespace vtc::ir {

enum class OpKind : uint16_t {
#define VTC_OP(id, ...) id,
#include "ir/ops.def"
#undef VTC_OP
};

// What an op does besides computing its results.
enum class Effect : uint8_t { Pure, ReadsState, WritesState, ReadsWritesState, Transfer, Terminator };
// The one property besides its effect that passes and backends ask of an op
// (ops.def's `class` column): Elementwise ops form `elementwise` regions;
// an Alias op's result is its operand 0's storage, reinterpreted.
enum class OpClass : uint8_t { None, Elementwise, Alias };

std::string_view effect_name(Effect e);
// Side effects that must not be silently dropped: state writes and transfers.
bool has_side_effect(Effect e);
bool touches_state(Effect e);

struct AttrSpec {
  std::string name;
  AttrKind kind = AttrKind::Int;
  bool optional = false;
  std::vector<std::string> enum_values;  // for AttrKind::Enum
  Attr default_value;                    // what an absent optional attribute means
};

struct InferContext;
using InferFn = void (*)(InferContext&);

struct OpInfo {
  OpKind kind;
  std::string_view id;        // C++ name, e.g. RmsNorm
  std::string_view mnemonic;  // text name, e.g. rms_norm
  int min_operands;
  int max_operands;           // -1: variadic
  int num_results;            // -1: one or more (fused regions)
  Effect effect;
  OpClass op_class;
  InferFn infer;
  std::vector<AttrSpec> attrs;

  const AttrSpec* find_attr(std::string_view name) const;
  bool is_elementwise() const { return op_class == OpClass::Elementwise; }
  bool is_alias() const { return op_class == OpClass::Alias; }
};

const OpInfo& op_info(OpKind kind);
const OpInfo* find_op(std::string_view mnemonic);
std::span<const OpInfo> all_ops();

}  // namespace vtc::ir
