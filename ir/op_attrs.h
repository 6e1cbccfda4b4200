// Typed attributes: one struct per op that has attributes, generated from
// ir/op_attrs.def. `RopeAttrs::of(op)` decodes and validates an op's
// attributes once (a missing required one, a wrong kind or an unknown enum
// value throws vtc::Error naming the attribute) and fills absent optional
// ones with their declared defaults; `to_attrs()` writes them back,
// omitting optional attributes equal to their default. Consumers outside
// ir/ read attributes only through these structs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/attr_enums.h"
#include "ir/module.h"

namespace vtc::ir {

#define VTC_ATTRS_BEGIN(Op_)  \
  struct Op_##Attrs {         \
    static constexpr OpKind op_kind = OpKind::Op_;
#define VTC_ATTR(Op_, name, kind, type, presence, def) type name = def;
#define VTC_ATTRS_END(Op_)              \
  static Op_##Attrs of(const Op& op);   \
  std::vector<NamedAttr> to_attrs() const; \
  }                                     \
  ;
#include "ir/op_attrs.def"
#undef VTC_ATTRS_BEGIN
#undef VTC_ATTR
#undef VTC_ATTRS_END

// The state an op names (its `state` symbol), or nullptr for an op that
// names none; the same for a weight op's `name`.
const std::string* state_symbol(const Op& op);
const std::string* weight_symbol(const Op& op);

// The declared attributes of an op kind (OpInfo::attrs is built from this).
std::vector<AttrSpec> declared_attrs(OpKind kind);

// The attribute table of docs/ir.md ("## Attributes"), one row per declared
// attribute, as markdown: | op | attribute | type | required | default |.
std::string attribute_table_markdown();

}  // namespace vtc::ir
