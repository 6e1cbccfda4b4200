// The error a request gets: an HTTP status and OpenAI's error fields. Any
// layer that validates a request throws it; the HTTP layer renders it as
// {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <stdexcept>
#include <string>

namespace vtc::serve {

struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int status_, std::string message, std::string param_ = {}, std::string code_ = {},
           std::string type_ = "invalid_request_error")
      : std::runtime_error(std::move(message)), status(status_), type(std::move(type_)), param(std::move(param_)),
        code(std::move(code_)) {}
};

}  // namespace vtc::serve
