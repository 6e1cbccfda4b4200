#include "serve/api/openai/tokenize.h"

#include <fmt/format.h>

#include "serve/api/common/api_error.h"
#include "serve/api/common/completion_request.h"
#include "serve/api/common/json_text.h"

namespace vtc::serve {

using nlohmann::json;

json tokenize_response(const json& body, const Engine& engine) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  for (const auto& [k, v] : body.items())
    if (k != "content" && k != "add_special" && k != "parse_special" && k != "with_pieces")
      throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", k), k);
  if (!body.contains("content") || !body["content"].is_string()) throw ApiError(400, "'content' must be a string", "content");
  for (const char* flag : {"add_special", "parse_special", "with_pieces"})
    if (body.contains(flag) && !body[flag].is_boolean()) throw ApiError(400, fmt::format("'{}' must be a boolean", flag), flag);
  const Tokenizer& tok = engine.tokenizer();
  const auto ids = tokenize_request_text(tok, body["content"].get<std::string>(), body.value("add_special", false),
                                         body.value("parse_special", false), "content");
  const bool pieces = body.value("with_pieces", false);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (!pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string piece = tok.token_piece(id);
    tokens.push_back({{"id", id}, {"piece", valid_utf8(piece)}, {"bytes", bytes_json(piece)}});
  }
  return {{"tokens", tokens}};
}

json detokenize_response(const json& body, const Engine& engine) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  for (const auto& [k, v] : body.items())
    if (k != "tokens") throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", k), k);
  if (!body.contains("tokens") || !body["tokens"].is_array()) throw ApiError(400, "'tokens' must be an array of token ids", "tokens");
  std::vector<int32_t> ids;
  for (const json& t : body["tokens"]) {
    if (!t.is_number_integer()) throw ApiError(400, "'tokens' must be an array of token ids", "tokens");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= engine.n_vocab())
      throw ApiError(400, fmt::format("token id {} is outside the vocabulary [0, {})", id, engine.n_vocab()), "tokens");
    ids.push_back(int32_t(id));
  }
  return {{"content", valid_utf8(engine.tokenizer().decode(ids))}};
}


json apply_template_response(const nlohmann::ordered_json& body, const PromptTemplate& chat_template) {
  return {{"prompt", valid_utf8(chat_template.render(chat_inputs_from_request(body)))}};
}

json models_response(const Engine& e, const std::string& model_name, int64_t created) {
  return {{"object", "list"},
          {"data", json::array({{{"id", model_name},
                                 {"object", "model"},
                                 {"created", created},
                                 {"owned_by", "vtc"},
                                 {"meta", {{"n_ctx", e.n_ctx()}, {"n_vocab", e.n_vocab()}}}}})}};
}

}  // namespace vtc::serve
