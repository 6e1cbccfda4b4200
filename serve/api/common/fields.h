// Reading a request body's fields: the one helper set every API parser
// uses (OpenAI completions and chat, Responses, Messages, embeddings,
// tokenize, the chat layer's messages). Each error is an ApiError 400
// naming the field by its path in the client's own body
// ("input[2].call_id"). Works on json and ordered_json alike.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "serve/api/common/api_error.h"

namespace vtc::serve::fields {

[[noreturn]] inline void bad(const std::string& name, const std::string& message) {
  throw ApiError(400, message, name);
}

// "a string", "an array", ...: how an error names what the client sent.
template <class Json>
const char* type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

// 400 "'NAME' must be WHAT, got TYPE" unless `ok`.
template <class Json>
void expect(const Json& v, bool ok, const std::string& name, const char* what) {
  if (!ok) bad(name, fmt::format("'{}' must be {}, got {}", name, what, type_name(v)));
}

// The field, or nullptr when it is absent or null.
template <class Json>
const Json* field(const Json& o, std::string_view name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

// A string field at `at`.`name`: "" when absent (or an error when `required`).
template <class Json>
std::string string_of(const Json& o, const char* name, const std::string& at, bool required) {
  const Json* v = field(o, name);
  if (!v) {
    if (required) bad(at + "." + name, fmt::format("'{}.{}' is required", at, name));
    return {};
  }
  if (!v->is_string()) bad(at + "." + name, fmt::format("'{}.{}' must be a string", at, name));
  return v->template get<std::string>();
}

// Optional scalars in a range; absent or null reads as nullopt.
template <class Json>
std::optional<int64_t> get_int(const Json& body, const std::string& name, int64_t lo, int64_t hi) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  expect(*v, v->is_number_integer() || v->is_number_unsigned(), name, "an integer");
  const int64_t x = v->is_number_unsigned() && v->template get<uint64_t>() > uint64_t(INT64_MAX)
                        ? INT64_MAX
                        : v->template get<int64_t>();
  if (x < lo || x > hi) bad(name, fmt::format("'{}' must be in [{}, {}], got {}", name, lo, hi, x));
  return x;
}

template <class Json>
std::optional<double> get_number(const Json& body, const std::string& name, double lo, double hi) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  expect(*v, v->is_number(), name, "a number");
  const double x = v->template get<double>();
  if (!(x >= lo && x <= hi)) bad(name, fmt::format("'{}' must be in [{}, {}], got {}", name, lo, hi, x));
  return x;
}

template <class Json>
std::optional<bool> get_bool(const Json& body, const std::string& name) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  expect(*v, v->is_boolean(), name, "a boolean");
  return v->template get<bool>();
}

// 400 "Unrecognized request argument supplied: K" (OpenAI's wording) for
// the first key of `body` not in `known`.
template <class Json>
void check_known(const Json& body, std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : body.items()) {
    bool found = false;
    for (std::string_view k : known) found = found || k == key;
    if (!found) throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", key), key);
  }
}

// 400 unless the body is a JSON object.
template <class Json>
void expect_object(const Json& body) {
  if (!body.is_object())
    throw ApiError(400, fmt::format("the request body must be a JSON object, got {}", type_name(body)));
}

}  // namespace vtc::serve::fields
