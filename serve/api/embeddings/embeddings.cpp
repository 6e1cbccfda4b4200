#include "serve/api/embeddings/embeddings.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>

#include "serve/api/common/completion_request.h"
#include "serve/api/common/fields.h"
#include "serve/api/common/json_text.h"
#include "support/error.h"

namespace vtc::serve {

using nlohmann::json;

Pooling parse_pooling(std::string_view name) {
  if (name == "none") return Pooling::None;
  if (name == "mean") return Pooling::Mean;
  if (name == "cls") return Pooling::Cls;
  if (name == "last") return Pooling::Last;
  throw Error(fmt::format("pooling must be none, mean, cls or last (got '{}')", name));
}

std::string_view pooling_name(Pooling p) {
  switch (p) {
    case Pooling::None: return "none";
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
    case Pooling::Last: return "last";
  }
  return "none";
}

Pooling model_pooling(const gguf::GgufFile& file) {
  const std::string key = file.architecture() + ".pooling_type";
  const auto v = file.get_int(key);
  if (!v) return Pooling::None;
  switch (*v) {
    case 0: return Pooling::None;
    case 1: return Pooling::Mean;
    case 2: return Pooling::Cls;
    case 3: return Pooling::Last;
    case 4: throw Error(fmt::format("{}: {} is rank (a reranker's head), which vtc does not support; choose --pooling",
                                    file.path(), key));
    default: throw Error(fmt::format("{}: {} has the unknown value {}", file.path(), key, *v));
  }
}

Pooling serving_pooling(const Engine& engine) {
  const std::string& chosen = engine.options().pooling;
  return chosen.empty() ? model_pooling(engine.file()) : parse_pooling(chosen);
}

void normalize_embedding(std::span<float> v, int mode) {
  double sum = 0.0;
  if (mode == -1) {
    sum = 1.0;
  } else if (mode == 0) {
    for (float x : v) sum = std::max(sum, double(std::fabs(x)));
    sum /= 32760.0;  // the int16 range
  } else if (mode == 2) {
    for (float x : v) sum += double(x) * double(x);
    sum = std::sqrt(sum);
  } else {
    for (float x : v) sum += std::pow(std::fabs(double(x)), double(mode));
    sum = std::pow(sum, 1.0 / double(mode));
  }
  const float scale = sum > 0.0 ? float(1.0 / sum) : 0.0f;
  for (float& x : v) x *= scale;
}

std::vector<float> pool_hidden(std::span<const float> hidden, int64_t n_tokens, int64_t width, Pooling p) {
  const auto row = [&](int64_t t) { return hidden.subspan(size_t(t * width), size_t(width)); };
  if (p == Pooling::Cls) return {row(0).begin(), row(0).end()};
  if (p == Pooling::Last) return {row(n_tokens - 1).begin(), row(n_tokens - 1).end()};
  if (p != Pooling::Mean) throw Error("pool_hidden: pooling none keeps every token's vector");
  std::vector<float> out(size_t(width), 0.0f);
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t i = 0; i < width; ++i) out[size_t(i)] += row(t)[size_t(i)];
  for (float& x : out) x /= float(n_tokens);
  return out;
}

namespace {

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit on one request's inputs

const char* const kInputShape = "a string, an array of strings, an array of token ids, or an array of arrays of token ids";

std::vector<int32_t> token_ids(const json& v, const Engine& engine, const std::string& param) {
  std::vector<int32_t> ids;
  for (const json& t : v) {
    if (!t.is_number_integer()) throw ApiError(400, fmt::format("'{}' must be {}", param, kInputShape), param);
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= engine.n_vocab())
      throw ApiError(400, fmt::format("{}: token id {} is outside the vocabulary [0, {})", param, id, engine.n_vocab()), param);
    ids.push_back(int32_t(id));
  }
  return ids;
}

std::vector<int32_t> one_input(const json& v, const Engine& engine, const std::string& param) {
  if (v.is_string()) {
    if (!engine.tokenizer().has_vocab())
      throw ApiError(400, fmt::format("{}: this model has no vocabulary, so text cannot be embedded; send token ids", param), param);
    return tokenize_request_text(engine.tokenizer(), v.get<std::string>(), true, true, param);
  }
  if (v.is_array()) return token_ids(v, engine, param);
  throw ApiError(400, fmt::format("'{}' must be {}", param, kInputShape), param);
}

bool all_integers(const json& v) {
  for (const json& t : v)
    if (!t.is_number_integer()) return false;
  return true;
}

}  // namespace

std::vector<std::vector<int32_t>> embedding_inputs(const json& value, const Engine& engine, const std::string& param) {
  std::vector<std::vector<int32_t>> inputs;
  if (value.is_string() || (value.is_array() && !value.empty() && all_integers(value))) {
    inputs.push_back(one_input(value, engine, param));
  } else if (value.is_array() && !value.empty()) {
    if (value.size() > kMaxInputs)
      throw ApiError(400, fmt::format("'{}' has {} inputs, more than {}", param, value.size(), kMaxInputs), param);
    for (size_t i = 0; i < value.size(); ++i) inputs.push_back(one_input(value[i], engine, fmt::format("{}[{}]", param, i)));
  } else {
    throw ApiError(400, fmt::format("'{}' must be {}, and not empty", param, kInputShape), param);
  }
  const bool many = inputs.size() > 1 || (value.is_array() && !all_integers(value));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = many ? fmt::format("{}[{}]", param, i) : param;
    const int64_t n = int64_t(inputs[i].size());
    if (n == 0) throw ApiError(400, fmt::format("{} is empty (no tokens)", name), param);
    if (n > engine.n_ctx())
      throw ApiError(400, fmt::format("{} has {} tokens, more than the context ({})", name, n, engine.n_ctx()), param,
                     "context_length_exceeded");
    if (!engine.fits_pool(n))
      throw ApiError(400, fmt::format("{} has {} tokens, more than the KV pool holds; raise --kv-pages", name, n), param,
                     "context_length_exceeded");
    // An encoder reads an input in one step (as the reference asks
    // n_ubatch >= the input's tokens).
    if (engine.reads_whole_sequences() && n > engine.max_step_tokens())
      throw ApiError(400, fmt::format("{} has {} tokens, more than one step reads ({}); this model's attention is not "
                                      "causal, so an input cannot be split: raise --max-step-tokens", name, n,
                                      engine.max_step_tokens()),
                     param, "context_length_exceeded");
  }
  return inputs;
}

std::string base64_floats(std::span<const float> v) {
  static const char* const digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> bytes(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    for (int k = 0; k < 4; ++k) bytes[i * 4 + size_t(k)] = uint8_t(bits >> (8 * k));  // little-endian on any host
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = uint32_t(bytes[i]) << 16;
    if (n > 1) chunk |= uint32_t(bytes[i + 1]) << 8;
    if (n > 2) chunk |= uint32_t(bytes[i + 2]);
    out += digits[(chunk >> 18) & 63];
    out += digits[(chunk >> 12) & 63];
    out += n > 1 ? digits[(chunk >> 6) & 63] : '=';
    out += n > 2 ? digits[chunk & 63] : '=';
  }
  return out;
}

namespace {

// Submits every input at once (so they share @embed steps) and waits for
// each one's hidden states [tokens x width], in input order.
std::vector<std::vector<float>> run_inputs(Engine& engine, const std::vector<std::vector<int32_t>>& inputs) {
  std::vector<std::shared_ptr<Request>> requests;
  for (const auto& ids : inputs) {
    GenerationParams p;
    p.prompt = ids;
    p.embeddings = true;
    requests.push_back(engine.submit(std::move(p)));
  }
  std::vector<std::vector<float>> out;
  for (auto& r : requests) {
    std::vector<TokenEvent> ignored;
    while (!r->poll(ignored, std::chrono::milliseconds(1000))) {
    }
    const Finish reason = r->finish_reason().kind;
    if (reason == Finish::Cancelled) throw ApiError(503, "The server is shutting down.", {}, {}, "unavailable_error");
    if (reason != Finish::Stop) throw ApiError(500, fmt::format("embedding failed: {}", r->error()), {}, {}, "server_error");
    out.push_back(r->hidden());
  }
  return out;
}

int normalize_of(const json& body, const Engine& engine) {
  const json* v = body.contains("embd_normalize") ? &body["embd_normalize"] : nullptr;
  if (!v) return engine.options().embd_normalize;
  if (!v->is_number_integer() || v->get<int64_t>() < -1 || v->get<int64_t>() > 64)
    throw ApiError(400, "'embd_normalize' must be an integer from -1 to 64", "embd_normalize");
  return int(v->get<int64_t>());
}

void check_enabled(const Engine& engine) {
  if (!engine.options().embeddings)
    throw ApiError(501, "This server does not support embeddings. Start it with `--embeddings`", {}, {},
                   "not_supported_error");
}

}  // namespace

// POST /v1/embeddings.
json openai_embeddings(const json& body, Engine& engine, const std::string& model_name) {
  check_enabled(engine);
  fields::expect_object(body);
  fields::check_known(body, {"input", "model", "encoding_format", "dimensions", "user", "embd_normalize"});
  const Pooling pooling = serving_pooling(engine);
  if (pooling == Pooling::None)
    throw ApiError(400, "Pooling type 'none' is not OAI compatible. Please use a different pooling type "
                        "(start the server with --pooling mean, cls or last, or use POST /embeddings)");
  if (!body.contains("input")) throw ApiError(400, "'input' is required", "input");
  bool base64 = false;
  if (body.contains("encoding_format")) {
    const json& f = body["encoding_format"];
    if (!f.is_string() || (f != "float" && f != "base64"))
      throw ApiError(400, "'encoding_format' must be \"float\" or \"base64\"", "encoding_format");
    base64 = f == "base64";
  }
  if (body.contains("model") && !body["model"].is_string()) throw ApiError(400, "'model' must be a string", "model");
  const int normalize = normalize_of(body, engine);
  const auto inputs = embedding_inputs(body["input"], engine);
  const auto hidden = run_inputs(engine, inputs);
  json data = json::array();
  int64_t tokens = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t n = int64_t(inputs[i].size());
    const int64_t width = int64_t(hidden[i].size()) / n;
    if (body.contains("dimensions") && body["dimensions"] != width)
      throw ApiError(400, fmt::format("'dimensions' must be the model's embedding width, {}", width), "dimensions");
    std::vector<float> v = pool_hidden(hidden[i], n, width, pooling);
    normalize_embedding(v, normalize);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", base64 ? json(base64_floats(v)) : json(v)}});
    tokens += n;
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", body.contains("model") ? body["model"].get<std::string>() : model_name},
          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

// POST /embeddings: llama-server's shape, [{"index", "embedding": [[...]]}],
// one vector per token with pooling none, else the pooled one.
json native_embeddings(const json& body, Engine& engine) {
  check_enabled(engine);
  fields::expect_object(body);
  fields::check_known(body, {"input", "content", "model", "embd_normalize", "encoding_format"});
  const char* field = body.contains("input") ? "input" : "content";
  if (!body.contains(field)) throw ApiError(400, "\"input\" or \"content\" must be provided", "input");
  const Pooling pooling = serving_pooling(engine);
  const int normalize = normalize_of(body, engine);
  const auto inputs = embedding_inputs(body[field], engine, field);
  const auto hidden = run_inputs(engine, inputs);
  json out = json::array();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t n = int64_t(inputs[i].size());
    const int64_t width = int64_t(hidden[i].size()) / n;
    json vectors = json::array();
    if (pooling == Pooling::None) {
      for (int64_t t = 0; t < n; ++t)
        vectors.push_back(std::vector<float>(hidden[i].begin() + t * width, hidden[i].begin() + (t + 1) * width));
    } else {
      std::vector<float> v = pool_hidden(hidden[i], n, width, pooling);
      normalize_embedding(v, normalize);
      vectors.push_back(std::move(v));
    }
    out.push_back({{"index", i}, {"embedding", std::move(vectors)}});
  }
  return out;
}

}  // namespace vtc::serve
