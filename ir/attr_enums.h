// The attribute enums of ir/attr_enums.def as C++ enum classes, with their
// IR spellings. Header-only (constexpr tables), so the CPU kernels can use
// the same enums without linking the IR library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>

namespace vtc::ir {

#define VTC_ENUM_BEGIN(E) enum class E : uint8_t {
#define VTC_ENUM_VALUE(E, value, text) value,
#define VTC_ENUM_END(E) };
#include "ir/attr_enums.def"
#undef VTC_ENUM_BEGIN
#undef VTC_ENUM_VALUE
#undef VTC_ENUM_END

// EnumNames<E>::names[i] spells enumerator i in the IR text.
template <class E>
struct EnumNames;

#define VTC_ENUM_BEGIN(E)                       \
  template <>                                   \
  struct EnumNames<E> {                         \
    static constexpr std::string_view type = #E; \
    static constexpr std::string_view names[] = {
#define VTC_ENUM_VALUE(E, value, text) text,
#define VTC_ENUM_END(E) \
  }                     \
  ;                     \
  }                     \
  ;
#include "ir/attr_enums.def"
#undef VTC_ENUM_BEGIN
#undef VTC_ENUM_VALUE
#undef VTC_ENUM_END

template <class E>
concept AttrEnum = requires { EnumNames<E>::names; };

template <AttrEnum E>
constexpr std::string_view enum_name(E e) {
  return EnumNames<E>::names[static_cast<size_t>(e)];
}

template <AttrEnum E>
constexpr std::optional<E> parse_enum(std::string_view text) {
  for (size_t i = 0; i < std::size(EnumNames<E>::names); ++i)
    if (EnumNames<E>::names[i] == text) return static_cast<E>(i);
  return std::nullopt;
}

// The multi-section rope modes take a [T, 4] position and 4 sections.
constexpr bool is_multi(RopeMode m) { return m == RopeMode::Multi || m == RopeMode::IMulti; }

}  // namespace vtc::ir
