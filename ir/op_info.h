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
// ops.def's `class` column: an Alias op's result is its operand 0's
// storage, reinterpreted.
enum class OpClass : uint8_t { None, Alias };
// ops.def's `pattern` column: what the fusion partitioner may merge an op
// with (TVM's op pattern kinds, ordered from most to least fusable).
enum class PatternKind : uint8_t { Elementwise, Broadcast, Injective, Reduction, OutEwiseFusable, Opaque };
std::string_view pattern_kind_name(PatternKind k);

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
  PatternKind pattern;
  InferFn infer;
  std::vector<AttrSpec> attrs;

  const AttrSpec* find_attr(std::string_view name) const;
  // Elementwise or broadcast: one output element per element of the
  // inputs (what an `elementwise` region and a matmul epilogue hold).
  bool is_elementwise() const { return pattern <= PatternKind::Broadcast; }
  bool is_alias() const { return op_class == OpClass::Alias; }
};

const OpInfo& op_info(OpKind kind);
const OpInfo* find_op(std::string_view mnemonic);
std::span<const OpInfo> all_ops();

}  // namespace vtc::ir
