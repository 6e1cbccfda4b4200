// The op table, built once from ops.def. Attribute schemas are written as
// short strings in the table (readable in one row) and parsed here on first
// use; a malformed schema is a programming error and aborts loudly.
#include "ir/op_info.h"

#include <cstdio>
#include <cstdlib>

#include "ir/shape_infer.h"

namespace vtc::ir {
namespace {

[[noreturn]] void bad_schema(std::string_view op, std::string_view what) {
  std::fprintf(stderr, "ops.def: op %.*s: bad attribute schema: %.*s\n", int(op.size()), op.data(),
               int(what.size()), what.data());
  std::abort();
}

AttrSpec parse_attr_spec(std::string_view op, std::string_view item) {
  AttrSpec spec;
  auto colon = item.find(':');
  if (colon == std::string_view::npos) bad_schema(op, item);
  spec.name = std::string(item.substr(0, colon));
  std::string_view kind = item.substr(colon + 1);
  if (!kind.empty() && kind.back() == '?') {
    spec.optional = true;
    kind.remove_suffix(1);
  }
  if (kind.starts_with("enum(") && kind.ends_with(")")) {
    spec.kind = AttrKind::Enum;
    std::string_view values = kind.substr(5, kind.size() - 6);
    while (!values.empty()) {
      auto bar = values.find('|');
      spec.enum_values.emplace_back(values.substr(0, bar));
      values = bar == std::string_view::npos ? std::string_view() : values.substr(bar + 1);
    }
    return spec;
  }
  for (auto k : {AttrKind::Int, AttrKind::Float, AttrKind::Bool, AttrKind::String, AttrKind::Symbol,
                 AttrKind::Type, AttrKind::Dim, AttrKind::Ints, AttrKind::Floats, AttrKind::Dims}) {
    if (attr_kind_name(k) == kind) {
      spec.kind = k;
      return spec;
    }
  }
  bad_schema(op, item);
}

std::vector<AttrSpec> parse_schema(std::string_view op, std::string_view schema) {
  std::vector<AttrSpec> specs;
  while (!schema.empty()) {
    auto comma = schema.find(", ");
    specs.push_back(parse_attr_spec(op, schema.substr(0, comma)));
    schema = comma == std::string_view::npos ? std::string_view() : schema.substr(comma + 2);
  }
  return specs;
}

std::vector<OpInfo> build_table() {
  std::vector<OpInfo> table;
#define VTC_OP(id, mnemonic, min_ops, max_ops, results, effect, op_class, infer, attrs)                   \
  table.push_back(OpInfo{OpKind::id, #id, mnemonic, min_ops, max_ops, results, Effect::effect, OpClass::op_class, \
                         &infer, parse_schema(mnemonic, attrs)});
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
