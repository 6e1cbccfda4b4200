// The one exception type vtc's libraries throw for bad input.
//
// Parsers and loaders report user-facing problems (a malformed GGUF, bad IR
// text) by throwing vtc::Error with a message that names the problem and
// where it is. Programming errors use assert instead.
#pragma once

#include <stdexcept>
#include <string>

namespace vtc {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace vtc
