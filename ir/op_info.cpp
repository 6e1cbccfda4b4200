// The op table, built once from ops.def; each op's attribute schema comes
// from its block in ir/op_attrs.def (declared_attrs).
#include "ir/op_info.h"

#include "ir/op_attrs.h"
#include "ir/shape_infer.h"

namespace vtc::ir {
namespace {

std::vector<OpInfo> build_table() {
  std::vector<OpInfo> table;
#define VTC_OP(id, mnemonic, min_ops, max_ops, results, effect, op_class, pattern, infer)                 \
  table.push_back(OpInfo{OpKind::id, #id, mnemonic, min_ops, max_ops, results, Effect::effect, OpClass::op_class, \
                         PatternKind::pattern,                                                                  \
                         &infer, declared_attrs(OpKind::id)});
#include "ir/ops.def"
#undef VTC_OP
  return table;
}

const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> t = build_table();
  return t;
}

}  // namespace

const AttrSpec* OpInfo::find_attr(std::string_view name) const {
  for (const auto& a : attrs)
    if (a.name == name) return &a;
  return nullptr;
}

std::string_view pattern_kind_name(PatternKind k) {
  switch (k) {
    case PatternKind::Elementwise: return "elementwise";
    case PatternKind::Broadcast: return "broadcast";
    case PatternKind::Injective: return "injective";
    case PatternKind::Reduction: return "reduction";
    case PatternKind::OutEwiseFusable: return "out-elemwise-fusable";
    case PatternKind::Opaque: return "opaque";
  }
  return "?";
}

const OpInfo& op_info(OpKind kind) { return table()[static_cast<size_t>(kind)]; }

const OpInfo* find_op(std::string_view mnemonic) {
  for (const auto& info : table())
    if (info.mnemonic == mnemonic) return &info;
  return nullptr;
}

std::span<const OpInfo> all_ops() { return table(); }

std::string_view effect_name(Effect e) {
  switch (e) {
    case Effect::Pure: return "pure";
    case Effect::ReadsState: return "reads state";
    case Effect::WritesState: return "writes state";
    case Effect::ReadsWritesState: return "reads and writes state";
    case Effect::Transfer: return "transfer";
    case Effect::Terminator: return "terminator";
  }
  return "?";
}

bool has_side_effect(Effect e) {
  return e == Effect::WritesState || e == Effect::ReadsWritesState || e == Effect::Transfer;
}

bool touches_state(Effect e) {
  return e == Effect::ReadsState || e == Effect::WritesState || e == Effect::ReadsWritesState;
}

}  // namespace vtc::ir
