// Embeddings: POST /v1/embeddings (OpenAI's shape) and POST /embeddings
// (llama-server's own), served when `vtc serve --embeddings` built the
// @embed step (serve/engine/engine.h, frontends/gguf/arch/arch.h).
//
// What a vector is, as llama-server computes it:
//   - the hidden state of every input token: for a decoder, the output of
//     the final norm, before the head (the reference's t_embd);
//   - pooled per input, on the host: mean over the input's tokens, the
//     first token's (cls), the last token's (last), or none (every token's,
//     /embeddings only: the reference answers /v1/embeddings with a 400);
//   - a pooled vector normalised as common_embd_normalize does: -1 none,
//     0 max-abs scaled to the int16 range, 1 taxicab, 2 euclidean (the
//     default), p > 2 the p-norm. Per-token vectors are not normalised.
// The default pooling is the file's <arch>.pooling_type, else none, as in
// llama_context; --pooling overrides it.
//
// Inputs (`input`, or `content` on /embeddings): a string, a list of
// strings, a list of token ids, or a list of lists of token ids. Text is
// tokenized with the model's special tokens added and parsed, as
// llama-server does. All inputs of a request are submitted together, so
// the engine reads them in shared @embed steps.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frontends/gguf/gguf.h"
#include "serve/engine/engine.h"

namespace vtc::serve {

enum class Pooling { None, Mean, Cls, Last };

// "none" | "mean" | "cls" | "last"; throws vtc::Error naming the choices.
Pooling parse_pooling(std::string_view name);
std::string_view pooling_name(Pooling p);
// The reference's default: the file's <arch>.pooling_type (0 none, 1 mean,
// 2 cls, 3 last), none when absent. Throws vtc::Error for rank (a reranker
// head, not supported) or an unknown value.
Pooling model_pooling(const gguf::GgufFile& file);
// --pooling when given (EngineOptions::pooling), else the model's.
Pooling serving_pooling(const Engine& engine);

// Scales `v` in place by common_embd_normalize's rule for `mode` (header).
void normalize_embedding(std::span<float> v, int mode);
// One input's vector from its hidden states [n_tokens x width] (not None).
std::vector<float> pool_hidden(std::span<const float> hidden, int64_t n_tokens, int64_t width, Pooling p);

// The token ids of each input of `value` (the request's `input` field,
// named `param` in errors). Throws ApiError 400 naming the input: not a
// string / list of strings / token ids / lists of token ids, empty, an id
// outside the vocabulary, longer than the context or the KV pool.
std::vector<std::vector<int32_t>> embedding_inputs(const nlohmann::json& value, const Engine& engine,
                                                   const std::string& param = "input");

// Little-endian float32 bytes in base64, as OpenAI's encoding_format=base64.
std::string base64_floats(std::span<const float> v);

// POST /v1/embeddings (OpenAI's shape) and POST /embeddings (llama-server's):
// validate the parsed body (ApiError 400 naming the field; 501 when the
// server was started without --embeddings), run its inputs, and build the
// 200 body.
nlohmann::json openai_embeddings(const nlohmann::json& body, Engine& engine, const std::string& model_name);
nlohmann::json native_embeddings(const nlohmann::json& body, Engine& engine);

}  // namespace vtc::serve
