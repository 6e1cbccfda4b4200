// The typed attribute structs of ir/op_attrs.def: decoding, encoding and
// the schema (OpInfo::attrs) and docs table built from the same rows.
#include "ir/op_attrs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "support/error.h"

namespace vtc::ir {
namespace {

enum class AttrPresence : uint8_t { Required, Optional };

void read(const Attr& a, int64_t& v) { v = a.i; }
void read(const Attr& a, double& v) { v = a.kind == AttrKind::Int ? double(a.i) : a.f; }
void read(const Attr& a, bool& v) { v = a.i != 0; }
void read(const Attr& a, std::string& v) { v = a.s; }
void read(const Attr& a, Dim& v) { v = a.dim; }
void read(const Attr& a, std::vector<int64_t>& v) { v = a.ints; }
void read(const Attr& a, Shape& v) { v = a.dims; }
template <AttrEnum E>
void read(const Attr& a, E& v) {
  if (auto e = parse_enum<E>(a.s)) {
    v = *e;
    return;
  }
  std::string allowed;
  for (auto n : EnumNames<E>::names) allowed += (allowed.empty() ? "" : ", ") + std::string(n);
  throw Error(fmt::format("attribute is '{}', expected one of {}", a.s, allowed));
}

// Int where Float is declared is accepted (an op built without the
// builder's coercion); every other kind must match.
template <class T>
void decode(const Op& op, const char* name, AttrKind kind, AttrPresence presence, T& field) {
  const Attr* a = op.attr(name);
  if (!a) {
    if (presence == AttrPresence::Required) throw Error(fmt::format("missing attribute '{}'", name));
    return;
  }
  if (a->kind != kind && !(kind == AttrKind::Float && a->kind == AttrKind::Int))
    throw Error(fmt::format("attribute '{}' must be {}", name, attr_kind_name(kind)));
  try {
    read(*a, field);
  } catch (const Error& e) {
    throw Error(fmt::format("'{}': {}", name, e.what()));
  }
}

Attr encode(int64_t v, AttrKind) { return Attr::of_int(v); }
Attr encode(double v, AttrKind) { return Attr::of_float(v); }
Attr encode(bool v, AttrKind) { return Attr::of_bool(v); }
Attr encode(const std::string& v, AttrKind kind) {
  Attr a;
  a.kind = kind;
  a.s = v;
  return a;
}
Attr encode(const Dim& v, AttrKind) { return Attr::of_dim(v); }
Attr encode(const std::vector<int64_t>& v, AttrKind) { return Attr::of_ints(v); }
Attr encode(const Shape& v, AttrKind) { return Attr::of_dims(v); }
template <AttrEnum E>
Attr encode(E v, AttrKind) {
  return Attr::of_enum(std::string(enum_name(v)));
}

void expect_kind(const Op& op, OpKind kind) {
  if (op.kind != kind)
    throw Error(fmt::format("op '{}' read as '{}'", op.mnemonic(), op_info(kind).mnemonic));
}

template <class T>
AttrSpec spec_of(const char* name, AttrKind kind, AttrPresence presence, const T& def) {
  AttrSpec s;
  s.name = name;
  s.kind = kind;
  s.optional = presence == AttrPresence::Optional;
  s.default_value = encode(def, kind);
  if constexpr (AttrEnum<T>)
    for (auto n : EnumNames<T>::names) s.enum_values.emplace_back(n);
  return s;
}

}  // namespace

#define VTC_ATTRS_BEGIN(Op_)                  \
  Op_##Attrs Op_##Attrs::of(const Op& op) {  \
    expect_kind(op, OpKind::Op_);             \
    Op_##Attrs a;
#define VTC_ATTR(Op_, name, kind, type, presence, def) \
  decode(op, #name, AttrKind::kind, AttrPresence::presence, a.name);
#define VTC_ATTRS_END(Op_) \
  return a;                \
  }
#include "ir/op_attrs.def"
#undef VTC_ATTRS_BEGIN
#undef VTC_ATTR
#undef VTC_ATTRS_END

#define VTC_ATTRS_BEGIN(Op_)                                \
  std::vector<NamedAttr> Op_##Attrs::to_attrs() const {     \
    static const Op_##Attrs defaults{};                     \
    std::vector<NamedAttr> out;
#define VTC_ATTR(Op_, name, kind, type, presence, def)                                       \
  if (AttrPresence::presence == AttrPresence::Required || !(name == defaults.name)) \
    out.push_back({#name, encode(name, AttrKind::kind)});
#define VTC_ATTRS_END(Op_) \
  return out;              \
  }
#include "ir/op_attrs.def"
#undef VTC_ATTRS_BEGIN
#undef VTC_ATTR
#undef VTC_ATTRS_END

std::vector<AttrSpec> declared_attrs(OpKind op_kind) {
  switch (op_kind) {
#define VTC_ATTRS_BEGIN(Op_)       \
  case OpKind::Op_: {              \
    const Op_##Attrs defaults{};   \
    return {
#define VTC_ATTR(Op_, name, kind, type, presence, def) \
  spec_of(#name, AttrKind::kind, AttrPresence::presence, defaults.name),
#define VTC_ATTRS_END(Op_) \
  };                       \
  }
#include "ir/op_attrs.def"
#undef VTC_ATTRS_BEGIN
#undef VTC_ATTR
#undef VTC_ATTRS_END
    default: return {};
  }
}

const std::string* state_symbol(const Op& op) {
  const Attr* a = op.attr("state");
  return a && a->kind == AttrKind::Symbol ? &a->s : nullptr;
}

const std::string* weight_symbol(const Op& op) {
  if (op.kind != OpKind::Weight) return nullptr;
  const Attr* a = op.attr("name");
  return a && a->kind == AttrKind::Symbol ? &a->s : nullptr;
}

std::string attribute_table_markdown() {
  std::string out = "| op | attribute | type | required | default |\n|---|---|---|---|---|\n";
  for (const OpInfo& info : all_ops()) {
    for (const AttrSpec& a : info.attrs) {
      std::string type(attr_kind_name(a.kind));
      if (a.kind == AttrKind::Enum) type = fmt::format("enum({})", fmt::join(a.enum_values, "\\|"));
      // An optional symbol's default is "none" (no state named), not "@".
      const bool no_default = !a.optional || (a.kind == AttrKind::Symbol && a.default_value.s.empty());
      out += fmt::format("| `{}` | `{}` | {} | {} | {} |\n", info.mnemonic, a.name, type, a.optional ? "no" : "yes",
                         no_default ? (a.optional ? "none" : "") : "`" + a.default_value.str() + "`");
    }
  }
  return out;
}

}  // namespace vtc::ir
