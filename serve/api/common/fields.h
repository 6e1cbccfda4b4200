// Reading fields of a request body that is translated into a chat body
// (responses_api.cpp, anthropic_api.cpp): each error is an ApiError 400
// naming the field by its path in the client's own body ("input[2].call_id").
#pragma once

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

#include "serve/api_error.h"

namespace vtc::serve::body_fields {

[[noreturn]] inline void bad(const std::string& name, const std::string& message) {
  throw ApiError(400, message, name);
}

// The field, or nullptr when it is absent or null.
inline const nlohmann::ordered_json* field(const nlohmann::ordered_json& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

// A string field at `at`.`name`: "" when absent (or an error when `required`).
inline std::string string_of(const nlohmann::ordered_json& o, const char* name, const std::string& at, bool required) {
  const nlohmann::ordered_json* v = field(o, name);
  if (!v) {
    if (required) bad(at + "." + name, fmt::format("'{}.{}' is required", at, name));
    return {};
  }
  if (!v->is_string()) bad(at + "." + name, fmt::format("'{}.{}' must be a string", at, name));
  return v->get<std::string>();
}

}  // namespace vtc::serve::body_fields
