// llama-server's text utilities: POST /tokenize, /detokenize and
// /apply-template. Each validates the parsed body (ApiError 400 naming the
// field) and builds the 200 body.
#pragma once

#include <nlohmann/json.hpp>

#include "serve/chat/chat_prompt.h"
#include "serve/engine/engine.h"

namespace vtc::serve {

// with_pieces gives [{"id", "piece", "bytes"}]: `piece` is the token's text
// with invalid UTF-8 replaced, `bytes` the raw bytes; /detokenize replaces
// invalid UTF-8 in `content` the same way.
nlohmann::json tokenize_response(const nlohmann::json& body, const Engine& engine);
nlohmann::json detokenize_response(const nlohmann::json& body, const Engine& engine);
// {"prompt": the text a chat body renders to}.
nlohmann::json apply_template_response(const nlohmann::ordered_json& body, const PromptTemplate& chat_template);
// GET /v1/models: the one model this server runs.
nlohmann::json models_response(const Engine& engine, const std::string& model_name, int64_t created);

}  // namespace vtc::serve
