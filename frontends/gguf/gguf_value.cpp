// Metadata values: typed accessors and display formatting.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "frontends/gguf/gguf.h"

namespace vtc::gguf {

std::string_view value_type_name(ValueType type) {
  switch (type) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "?";
}

bool ValueArray::operator==(const ValueArray& other) const {
  return elem_type == other.elem_type && items == other.items;
}

Value Value::array(ValueType elem_type, std::vector<Value> items) {
  return Value(ValueArray{elem_type, std::move(items)});
}

Value Value::string_array(const std::vector<std::string>& items) {
  std::vector<Value> values(items.begin(), items.end());
  return array(ValueType::STRING, std::move(values));
}

std::optional<int64_t> Value::as_int() const {
  return std::visit(
      [](const auto& v) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? 1 : 0;
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          return static_cast<int64_t>(v);
        } else if constexpr (std::is_integral_v<T>) {
          return static_cast<int64_t>(v);
        } else {
          return std::nullopt;
        }
      },
      storage_);
}

std::optional<double> Value::as_float() const {
  if (auto* f = std::get_if<float>(&storage_)) return *f;
  if (auto* d = std::get_if<double>(&storage_)) return *d;
  if (type() == ValueType::BOOL) return std::nullopt;
  if (auto i = as_int()) return static_cast<double>(*i);
  if (auto* u = std::get_if<uint64_t>(&storage_)) return static_cast<double>(*u);
  return std::nullopt;
}

std::optional<uint64_t> Value::as_bits64() const {
  if (auto* u = std::get_if<uint64_t>(&storage_)) return *u;
  if (auto i = as_int()) return static_cast<uint64_t>(*i);
  return std::nullopt;
}

std::optional<bool> Value::as_bool() const {
  if (auto* b = std::get_if<bool>(&storage_)) return *b;
  return std::nullopt;
}

const std::string* Value::as_string() const { return std::get_if<std::string>(&storage_); }

const ValueArray* Value::as_array() const { return std::get_if<ValueArray>(&storage_); }

std::string Value::to_display(size_t max_items) const {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          constexpr size_t kMaxChars = 60;
          size_t cut = std::min(v.size(), kMaxChars);
          while (cut < v.size() && cut > 0 && (static_cast<unsigned char>(v[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
          std::string shown = cut < v.size() ? v.substr(0, cut) + "..." : v;
          std::string escaped;
          for (char c : shown) {
            if (c == '\n') escaped += "\\n";
            else if (c == '\r') escaped += "\\r";
            else if (c == '\t') escaped += "\\t";
            else if (c == '"' || c == '\\') escaped += std::string("\\") + c;
            else escaped += c;
          }
          return fmt::format("\"{}\"", escaped);
        } else if constexpr (std::is_same_v<T, ValueArray>) {
          std::string out = fmt::format("[{} x {}]", v.items.size(), value_type_name(v.elem_type));
          if (v.items.empty()) return out;
          out += " {";
          for (size_t i = 0; i < v.items.size() && i < max_items; ++i)
            out += (i ? ", " : "") + v.items[i].to_display(max_items);
          return out + (v.items.size() > max_items ? ", ...}" : "}");
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
          return fmt::format("{}", static_cast<int>(v));
        } else {
          return fmt::format("{}", v);
        }
      },
      storage_);
}

}  // namespace vtc::gguf
