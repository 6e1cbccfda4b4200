#include "serve/http_server.h"

#include <httplib.h>
#include <fmt/format.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "serve/openai_api.h"
#include "support/error.h"

namespace vtc::serve {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& type,
                const std::string& param = {}, const std::string& code = {}) {
  send_json(res, status, error_body(message, type, param, code));
}

const char* endpoint_label(const std::string& path) {
  static const char* known[] = {"/health", "/v1/models", "/v1/completions", "/v1/chat/completions",
                                "/tokenize", "/detokenize", "/metrics"};
  for (const char* k : known)
    if (path == k) return k;
  return "other";
}

bool write_all(httplib::DataSink& sink, const std::string& s) { return sink.write(s.data(), s.size()); }

bool write_event(httplib::DataSink& sink, const json& j) { return write_all(sink, "data: " + j.dump() + "\n\n"); }

}  // namespace

HttpServer::HttpServer(const HttpOptions& o, Metrics& metrics)
    : options_(o), metrics_(metrics), server_(std::make_unique<httplib::Server>()) {
  const int threads = std::max(8, o.http_threads);
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  server_->set_keep_alive_timeout(2);
  routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  if (options_.port == 0) {
    int port = server_->bind_to_any_port(options_.host);
    if (port < 0) throw Error(fmt::format("serve: cannot bind {}", options_.host));
    return port;
  }
  if (!server_->bind_to_port(options_.host, options_.port))
    throw Error(fmt::format("serve: cannot bind {}:{} (in use, or not a local address)", options_.host, options_.port));
  return options_.port;
}

void HttpServer::listen() { server_->listen_after_bind(); }
void HttpServer::stop() { server_->stop(); }
void HttpServer::set_engine(Engine* engine, const std::string& chat_template) {
  options_.chat_template = chat_template;
  engine_ = engine;
}

void HttpServer::routes() {
  httplib::Server& s = *server_;
  // Auth, readiness and draining, before any route runs.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (!options_.api_key.empty()) {
      const std::string auth = req.get_header_value("Authorization");
      if (auth != "Bearer " + options_.api_key) {
        send_error(res, 401, auth.empty() ? "You didn't provide an API key (Authorization: Bearer KEY)." : "Incorrect API key provided.",
                   "invalid_request_error", {}, "invalid_api_key");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (engine_.load() == nullptr || draining_) {
      send_error(res, 503, draining_ ? "The server is shutting down." : "Loading model", "unavailable_error");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Unknown endpoints (and wrong methods) get an OpenAI-shaped body too.
  s.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 404) {
      const bool known = std::string(endpoint_label(req.path)) != "other";
      if (known) res.status = 405;
      send_error(res, res.status,
                 known ? fmt::format("Method {} is not allowed on {}.", req.method, req.path)
                       : fmt::format("Unknown request URL: {} {}. Please check the URL for typos.", req.method, req.path),
                 "invalid_request_error", {}, known ? "method_not_allowed" : "unknown_url");
    } else {
      send_error(res, res.status, fmt::format("HTTP status {}", res.status), "invalid_request_error");
    }
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      send_json(res, e.status, error_body(e.what(), e.type, e.param, e.code));
    } catch (const std::exception& e) {
      send_error(res, 500, e.what(), "server_error");
    } catch (...) {
      send_error(res, 500, "unknown error", "server_error");
    }
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.request_done(endpoint_label(req.path), res.status);
  });

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (engine_.load() == nullptr) send_error(res, 503, "Loading model", "unavailable_error");
    else send_json(res, 200, {{"status", draining_ ? "shutting down" : "ok"}});
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(engine_.load()->gauges()), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    Engine& e = *engine_.load();
    send_json(res, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", options_.model_name},
                                      {"object", "model"},
                                      {"created", int64_t(std::time(nullptr))},
                                      {"owned_by", "vtc"},
                                      {"meta", {{"n_ctx", e.n_ctx()}, {"n_vocab", e.n_vocab()}}}}})}});
  });
  auto parse_body = [](const httplib::Request& req) {
    json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded())
      throw ApiError(400, "We could not parse the JSON body of your request: it is not valid JSON.", {}, "invalid_json");
    if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
    return body;
  };
  s.Post("/tokenize", [this, parse_body](const httplib::Request& req, httplib::Response& res) {
    json body = parse_body(req);
    for (const auto& [k, v] : body.items())
      if (k != "content" && k != "add_special" && k != "parse_special" && k != "with_pieces")
        throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", k), k);
    if (!body.contains("content") || !body["content"].is_string()) throw ApiError(400, "'content' must be a string", "content");
    for (const char* flag : {"add_special", "parse_special", "with_pieces"})
      if (body.contains(flag) && !body[flag].is_boolean()) throw ApiError(400, fmt::format("'{}' must be a boolean", flag), flag);
    const Tokenizer& tok = engine_.load()->tokenizer();
    auto ids = tokenize_request_text(tok, body["content"].get<std::string>(), body.value("add_special", false),
                                     body.value("parse_special", false), "content");
    json tokens = json::array();
    for (int32_t id : ids)
      tokens.push_back(body.value("with_pieces", false) ? json{{"id", id}, {"piece", tok.token_piece(id)}} : json(id));
    send_json(res, 200, {{"tokens", tokens}});
  });
  s.Post("/detokenize", [this, parse_body](const httplib::Request& req, httplib::Response& res) {
    json body = parse_body(req);
    for (const auto& [k, v] : body.items())
      if (k != "tokens") throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", k), k);
    if (!body.contains("tokens") || !body["tokens"].is_array()) throw ApiError(400, "'tokens' must be an array of token ids", "tokens");
    Engine& e = *engine_.load();
    std::vector<int32_t> ids;
    for (const json& t : body["tokens"]) {
      if (!t.is_number_integer()) throw ApiError(400, "'tokens' must be an array of token ids", "tokens");
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= e.n_vocab())
        throw ApiError(400, fmt::format("token id {} is outside the vocabulary [0, {})", id, e.n_vocab()), "tokens");
      ids.push_back(int32_t(id));
    }
    send_json(res, 200, {{"content", e.tokenizer().decode(ids)}});
  });
  for (bool chat : {false, true}) {
    s.Post(chat ? "/v1/chat/completions" : "/v1/completions",
           [this, chat, parse_body](const httplib::Request& req, httplib::Response& res) {
             Engine* engine = engine_.load();
             auto cr = std::make_shared<CompletionRequest>(parse_completion(parse_body(req), chat, *engine, options_.chat_template));
             ResponseInfo info{fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id_++), options_.model_name,
                               int64_t(std::time(nullptr)), chat};
             std::shared_ptr<Request> r = engine->submit(cr->gen);
             const Tokenizer* tok = &engine->tokenizer();
             // On a failed write (client gone) httplib calls this with false.
             auto on_close = [engine, r](bool success) {
               if (!success) engine->cancel(r);
             };
             if (cr->stream) {
               res.set_header("Cache-Control", "no-cache");
               res.set_chunked_content_provider("text/event-stream", [engine, r, cr, info, tok](size_t, httplib::DataSink& sink) {
                 bool first = true;
                 std::vector<TokenEvent> events;
                 for (;;) {
                   events.clear();
                   const bool done = r->poll(events, 200ms);
                   if (!sink.is_writable()) return engine->cancel(r), false;
                   for (const auto& e : events) {
                     if (e.text.empty() && !cr->logprobs && !first) continue;
                     if (!write_event(sink, stream_chunk(info, *cr, {e}, "", first, *tok))) return engine->cancel(r), false;
                     first = false;
                   }
                   if (!done) {
                     if (events.empty() && !write_all(sink, ": keep-alive\n\n")) return engine->cancel(r), false;
                     continue;
                   }
                   const std::string reason = r->finish_reason();
                   if (reason == "error") {
                     write_event(sink, error_body(r->error(), "server_error"));
                   } else {
                     write_event(sink, stream_chunk(info, *cr, {}, reason == "cancelled" ? "stop" : reason, first, *tok));
                     if (cr->include_usage) write_event(sink, usage_chunk(info, *r));
                   }
                   write_all(sink, "data: [DONE]\n\n");
                   sink.done();
                   return true;
                 }
               }, on_close);
               return;
             }
             res.set_chunked_content_provider("application/json", [engine, r, cr, info, tok](size_t, httplib::DataSink& sink) {
               std::vector<TokenEvent> events;
               while (!r->poll(events, 100ms))
                 if (!sink.is_writable()) return engine->cancel(r), false;
               std::string text;
               for (const auto& e : events) text += e.text;
               json body = r->finish_reason() == "error" ? error_body(r->error(), "server_error")
                                                         : completion_body(info, *cr, *r, text, events, *tok);
               write_all(sink, body.dump());
               sink.done();
               return true;
             }, on_close);
           });
  }
}

}  // namespace vtc::serve
