#include "serve/api/common/completion_request.h"

#include "serve/api/common/api_error.h"
#include "support/error.h"

namespace vtc::serve {

std::vector<int32_t> tokenize_request_text(const Tokenizer& tok, std::string_view text, bool add_special,
                                           bool parse_special, const std::string& param) {
  try {
    return tok.encode(text, add_special, parse_special);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), param);
  }
}

}  // namespace vtc::serve
