#include "ir/attr.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace vtc::ir {

std::string_view attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "int";
    case AttrKind::Float: return "float";
    case AttrKind::Bool: return "bool";
    case AttrKind::String: return "string";
    case AttrKind::Symbol: return "symbol";
    case AttrKind::Enum: return "enum";
    case AttrKind::Type: return "type";
    case AttrKind::Dim: return "dim";
    case AttrKind::Ints: return "ints";
    case AttrKind::Floats: return "floats";
    case AttrKind::Dims: return "dims";
  }
  return "?";
}

Attr Attr::of_int(int64_t v) { Attr a; a.kind = AttrKind::Int; a.i = v; return a; }
Attr Attr::of_float(double v) { Attr a; a.kind = AttrKind::Float; a.f = v; return a; }
Attr Attr::of_bool(bool v) { Attr a; a.kind = AttrKind::Bool; a.i = v; return a; }
Attr Attr::of_string(std::string v) { Attr a; a.kind = AttrKind::String; a.s = std::move(v); return a; }
Attr Attr::of_symbol(std::string v) { Attr a; a.kind = AttrKind::Symbol; a.s = std::move(v); return a; }
Attr Attr::of_enum(std::string v) { Attr a; a.kind = AttrKind::Enum; a.s = std::move(v); return a; }
Attr Attr::of_type(std::string v) { Attr a; a.kind = AttrKind::Type; a.s = std::move(v); return a; }
Attr Attr::of_dim(ir::Dim v) { Attr a; a.kind = AttrKind::Dim; a.dim = std::move(v); return a; }
Attr Attr::of_ints(std::vector<int64_t> v) { Attr a; a.kind = AttrKind::Ints; a.ints = std::move(v); return a; }
Attr Attr::of_floats(std::vector<double> v) { Attr a; a.kind = AttrKind::Floats; a.floats = std::move(v); return a; }
Attr Attr::of_dims(std::vector<ir::Dim> v) { Attr a; a.kind = AttrKind::Dims; a.dims = std::move(v); return a; }

namespace {
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
}  // namespace

bool operator==(const Attr& a, const Attr& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case AttrKind::Int:
    case AttrKind::Bool: return a.i == b.i;
    case AttrKind::Float: return same_bits(a.f, b.f);
    case AttrKind::String:
    case AttrKind::Symbol:
    case AttrKind::Enum:
    case AttrKind::Type: return a.s == b.s;
    case AttrKind::Dim: return a.dim == b.dim;
    case AttrKind::Ints: return a.ints == b.ints;
    case AttrKind::Floats:
      if (a.floats.size() != b.floats.size()) return false;
      for (size_t k = 0; k < a.floats.size(); ++k)
        if (!same_bits(a.floats[k], b.floats[k])) return false;
      return true;
    case AttrKind::Dims: return a.dims == b.dims;
  }
  return false;
}

std::string format_double(double v) {
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  // A float literal must look like one, or it would read back as an int.
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string quote_string(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out + "\"";
}

std::string Attr::str() const {
  auto join = [](const auto& items, auto fmt) {
    std::string out = "[";
    for (size_t k = 0; k < items.size(); ++k) out += (k ? ", " : "") + fmt(items[k]);
    return out + "]";
  };
  switch (kind) {
    case AttrKind::Int: return std::to_string(i);
    case AttrKind::Float: return format_double(f);
    case AttrKind::Bool: return i ? "true" : "false";
    case AttrKind::String: return quote_string(s);
    case AttrKind::Symbol: return "@" + s;
    case AttrKind::Enum:
    case AttrKind::Type: return s;
    case AttrKind::Dim: return dim.str();
    case AttrKind::Ints: return join(ints, [](int64_t v) { return std::to_string(v); });
    case AttrKind::Floats: return join(floats, [](double v) { return format_double(v); });
    case AttrKind::Dims: return join(dims, [](const ir::Dim& d) { return d.str(); });
  }
  return "?";
}

bool coerce_attr(Attr& a, AttrKind want) {
  if (a.kind == want) return true;
  if (a.kind == AttrKind::Int && want == AttrKind::Float) {
    a = Attr::of_float(static_cast<double>(a.i));
  } else if (a.kind == AttrKind::Int && want == AttrKind::Dim) {
    a = Attr::of_dim(ir::Dim(a.i));
  } else if (a.kind == AttrKind::Ints && want == AttrKind::Floats) {
    std::vector<double> v(a.ints.begin(), a.ints.end());
    a = Attr::of_floats(std::move(v));
  } else if (a.kind == AttrKind::Ints && want == AttrKind::Dims) {
    std::vector<ir::Dim> v(a.ints.begin(), a.ints.end());
    a = Attr::of_dims(std::move(v));
  } else if (a.kind == AttrKind::Floats && want == AttrKind::Ints && a.floats.empty()) {
    a = Attr::of_ints({});
  } else if (a.kind == AttrKind::Enum && want == AttrKind::Type) {
    a.kind = AttrKind::Type;
  } else {
    return false;
  }
  return true;
}

}  // namespace vtc::ir
