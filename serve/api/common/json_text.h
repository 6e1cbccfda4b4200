// Text from token bytes into JSON. A token's piece need not be valid UTF-8
// on its own (byte-fallback tokens, a CJK character or an emoji split
// across tokens), and nlohmann::json throws when it dumps such a string.
// Every string built from token bytes goes through valid_utf8() before it
// enters a JSON value; every body is dumped with dump_json().
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace vtc::serve {

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF).
bool is_valid_utf8(std::string_view s);
// `s` with each byte that does not begin a well-formed sequence replaced
// by U+FFFD (the tokenizer's StreamingDecoder does the same).
std::string valid_utf8(std::string_view s);
// [b0, b1, ...]: the raw bytes, as OpenAI's logprobs `bytes`.
nlohmann::json bytes_json(std::string_view s);
// json::dump that cannot throw on text (invalid UTF-8 would be replaced).
std::string dump_json(const nlohmann::json& j);

// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_body(const std::string& message, const std::string& type, const std::string& param = {},
                          const std::string& code = {});

}  // namespace vtc::serve
