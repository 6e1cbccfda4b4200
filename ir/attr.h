// Op attributes: a small tagged value plus a name.
//
// The op table declares the attribute schema per op (see ops.def); the
// parser coerces what it read to that schema (an int literal where a float
// is declared becomes a float) so that printing is canonical and the round
// trip is exact.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dim.h"

namespace vtc::ir {

enum class AttrKind : uint8_t { Int, Float, Bool, String, Symbol, Enum, Type, Dim, Ints, Floats, Dims };
std::string_view attr_kind_name(AttrKind k);

struct Attr {
  AttrKind kind = AttrKind::Int;
  int64_t i = 0;                // Int, Bool (0/1)
  double f = 0;                 // Float
  std::string s;                // String, Symbol (without '@'), Enum, Type
  ir::Dim dim;                  // Dim
  std::vector<int64_t> ints;    // Ints
  std::vector<double> floats;   // Floats
  std::vector<ir::Dim> dims;    // Dims

  static Attr of_int(int64_t v);
  static Attr of_float(double v);
  static Attr of_bool(bool v);
  static Attr of_string(std::string v);
  static Attr of_symbol(std::string v);
  static Attr of_enum(std::string v);
  static Attr of_type(std::string v);
  static Attr of_dim(ir::Dim v);
  static Attr of_ints(std::vector<int64_t> v);
  static Attr of_floats(std::vector<double> v);
  static Attr of_dims(std::vector<ir::Dim> v);

  std::string str() const;  // textual form, as the printer writes it
  // Floats compare by bit pattern so NaN attributes round-trip as equal.
  friend bool operator==(const Attr& a, const Attr& b);
};

struct NamedAttr {
  std::string name;
  Attr value;
  friend bool operator==(const NamedAttr& a, const NamedAttr& b) {
    return a.name == b.name && a.value == b.value;
  }
};

// Converts `a` to `want` where that loses nothing (Int -> Float, Int -> Dim,
// Ints -> Floats/Dims, Dims of constants -> Ints, Enum -> Type). Returns
// false and leaves `a` alone otherwise.
bool coerce_attr(Attr& a, AttrKind want);

std::string format_double(double v);     // shortest round-trip form, always with '.', 'e', inf or nan
std::string quote_string(std::string_view s);

}  // namespace vtc::ir
