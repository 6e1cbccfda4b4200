// The router of `vtc serve`: the endpoint table, and what every answer
// shares. The connection layer (server.cpp) has read a whole request under
// its limits before httplib routes it here.
//
// Before any route runs: the API key (Authorization: Bearer KEY, or
// x-api-key: KEY), readiness (503 + Retry-After while loading or
// draining), and an encoder model's 501 on the generating endpoints.
// Unknown paths get 404 and wrong methods 405, in OpenAI's error shape
// (Anthropic's on its paths). An ApiError from an API layer becomes its
// status and body; any other exception a 500.
//
// Three kinds of endpoint, one line each in routes():
//   get(path, handler)                    a plain answer
//   post_json(path, fn(body, context))    a JSON body in, a JSON body out
//   post_generation(path, fn(...))        a JSON body in, a generation out:
//       fn parses the body into a CompletionRequest and a ResponseFormat
//       (serve/api), and respond_with_generation streams it (SSE) or
//       holds the whole body until it is generated.
#include <fmt/format.h>
#include <httplib.h>

#include <ctime>
#include <map>
#include <mutex>
#include <set>

#include "serve/api/anthropic/messages.h"
#include "serve/api/common/generation_loop.h"
#include "serve/api/common/json_text.h"
#include "serve/api/embeddings/embeddings.h"
#include "serve/api/openai/completions.h"
#include "serve/api/openai/tokenize.h"
#include "serve/api/responses/responses.h"
#include "serve/http/router.h"
#include "serve/http/server.h"
#include "serve/webui/webui.h"

namespace vtc::serve {

using nlohmann::json;
using nlohmann::ordered_json;
using namespace http;

// --- The endpoint table --------------------------------------------------------
namespace {

struct EndpointTable {
  std::mutex mu;
  std::set<std::string> paths;       // registered (node-stable: labels point into it)
  std::set<std::string> generating;  // answered with a generation (an encoder gets 501)
};

EndpointTable& endpoints() {
  static EndpointTable table;
  return table;
}

void register_endpoint(const std::string& path, bool generates) {
  EndpointTable& t = endpoints();
  std::lock_guard<std::mutex> lock(t.mu);
  t.paths.insert(path);
  if (generates) t.generating.insert(path);
}

bool is_generation_path(const std::string& path) {
  EndpointTable& t = endpoints();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.generating.count(path) != 0;
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

bool write_all(httplib::DataSink& sink, const std::string& s) { return sink.write(s.data(), s.size()); }

// Ordered: chat templates and schema grammars see the client's key order.
ordered_json parse_ordered_body(const httplib::Request& req) {
  auto body = ordered_json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded())
    throw ApiError(400, "We could not parse the JSON body of your request: it is not valid JSON.", {}, "invalid_json");
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return body;
}

}  // namespace

namespace http {

const char* endpoint_label(const std::string& path) {
  EndpointTable& t = endpoints();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.paths.find(path);
  return it == t.paths.end() ? "other" : it->c_str();
}

json error_json(const std::string& path, int status, const std::string& message, const std::string& type,
                const std::string& param, const std::string& code) {
  return is_anthropic_path(path) ? anthropic_error_body(status, message) : error_body(message, type, param, code);
}

}  // namespace http

// --- Generations ----------------------------------------------------------------
namespace {

// A non-streamed answer sends no byte (not even its status line) until its
// choices are generated, so a load balancer may retry the request on another
// replica when this one dies first (deploy/haproxy.cfg: retry-on
// empty-response). The wait takes none of the choices' tokens.
// Returns false when it ended early: the client closed its sending side (it
// may be gone or may still read, and only a write tells), or a failure that
// whole_response meets again and answers.
bool hold_until_generated(Engine& engine, Choices& choices) {
  try {
    for (;;) {
      choices.submit_rest(engine);
      if (choices.all_finished()) return true;
      if (peer_read_closed()) return false;
      // Sleep on the first unfinished choice: woken by its end at once (a
      // socket poll with a backoff made a finished answer wait up to 16 ms),
      // and every 16 ms to look at the connection and submit more choices.
      for (const auto& request : choices.requests())
        if (request->finish_reason().kind == Finish::None) {
          request->wait_finished(std::chrono::milliseconds(16));
          break;
        }
    }
  } catch (const std::exception&) {
    return false;
  }
}

// Answers with a generation: server-sent events through a chunked content
// provider (close-delimited for HTTP/1.0) when the request streams, else one
// JSON body, held back until generated (above; a provider again once the
// client half-closes). Every generating endpoint ends here. The provider
// bodies (serve/api/common/generation_loop.h) never throw, so no request can end the
// process; a client gone cancels the request's choices.
void respond_with_generation(const httplib::Request& req, httplib::Response& res, Engine* engine,
                             std::shared_ptr<const CompletionRequest> cr, std::shared_ptr<ResponseFormat> format) {
  std::shared_ptr<Choices> r = submit_choices(*engine, *cr);
  // On a failed write (client gone) httplib calls this with false.
  auto on_close = [engine, r](bool success) {
    if (!success) r->cancel(*engine);
  };
  // HTTP/1.0 has no chunked encoding: its bodies are close-delimited.
  const bool http10 = req.version == "HTTP/1.0";
  auto provide = [&res, http10](const char* type, httplib::ContentProviderWithoutLength p,
                                httplib::ContentProviderResourceReleaser done) {
    if (http10) res.set_content_provider(type, std::move(p), std::move(done));
    else res.set_chunked_content_provider(type, std::move(p), std::move(done));
  };
  auto sink_of = [](httplib::DataSink& sink) {
    return ResponseSink{[&sink](const std::string& data) { return write_all(sink, data); },
                        [&sink] { return sink.is_writable(); }};
  };
  if (cr->stream) {
    res.set_header("Cache-Control", "no-cache");
    provide("text/event-stream", [engine, r, cr, format, sink_of](size_t, httplib::DataSink& sink) {
      const bool ok = stream_response(*engine, *r, *cr, *format, sink_of(sink));
      if (ok) sink.done();
      return ok;
    }, on_close);
    return;
  }
  if (hold_until_generated(*engine, *r)) {
    // Status line, headers and body leave together.
    std::string body;
    whole_response(*engine, *r, *format, {[&body](const std::string& data) { body += data; return true; }, [] { return true; }});
    res.set_content(body, "application/json");
    return;
  }
  // The format reads *cr: both live as long as the provider.
  provide("application/json", [engine, r, cr, format, sink_of](size_t, httplib::DataSink& sink) {
    ResponseSink out = sink_of(sink);
    // A client that half-closed may still read, or may be gone: a space
    // before the JSON tells (a gone one answers with a reset, and the next
    // write fails).
    out.alive = [&sink] { return sink.is_writable() && (!peer_read_closed() || write_all(sink, " ")); };
    const bool ok = whole_response(*engine, *r, *format, out);
    if (ok) sink.done();
    return ok;
  }, on_close);
}

}  // namespace

// --- The three kinds of endpoint -----------------------------------------------------
struct HttpServer::Router {
  HttpServer& owner;
  httplib::Server& s;

  void get(const std::string& path, httplib::Server::Handler handler) {
    register_endpoint(path, false);
    s.Get(path, std::move(handler));
  }
  // fn(const ordered_json& body, Engine&) -> json, answered 200.
  template <class Fn>
  void post_json(const std::string& path, Fn fn) {
    register_endpoint(path, false);
    // The handlers outlive this Router (a local of routes()): they capture the server.
    s.Post(path, [server = &owner, fn](const httplib::Request& req, httplib::Response& res) {
      send_json(res, 200, fn(parse_ordered_body(req), *server->engine_.load()));
    });
  }
  // fn(const ordered_json& body, Engine&, const PromptTemplate&, uint64_t id)
  //   -> GenerationAnswer: the parsed request and its response format.
  template <class Fn>
  void post_generation(const std::string& path, Fn fn) {
    register_endpoint(path, true);
    s.Post(path, [server = &owner, fn](const httplib::Request& req, httplib::Response& res) {
      Engine& e = *server->engine_.load();
      GenerationAnswer a = fn(parse_ordered_body(req), e, *server->chat_template_, server->next_id_++);
      respond_with_generation(req, res, &e, std::move(a.request), std::move(a.format));
    });
  }
};

void HttpServer::routes() {
  checks();
  Router r{*this, *server_};
  if (options_.webui) r.get("/", serve_webui);  // the built-in web chat (serve/webui)
  r.get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (engine_.load() == nullptr) send_json(res, 503, error_body("Loading model", "unavailable_error"));
    else if (out_of_rotation_) {
      json body = error_body("The server is shutting down.", "unavailable_error");
      body["status"] = "draining";
      send_json(res, 503, body);
    } else send_json(res, 200, {{"status", "ok"}});
  });
  r.get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(engine_.load()->gauges()), "text/plain; version=0.0.4");
  });
  r.get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, models_response(*engine_.load(), options_.model_name, int64_t(std::time(nullptr))));
  });
  const std::string model = options_.model_name;
  const auto now = [] { return int64_t(std::time(nullptr)); };
  // The endpoint table: one line per endpoint (serve/api/<name>/ holds its parsing and shapes).
  r.post_json("/tokenize", [](const ordered_json& body, Engine& e) { return tokenize_response(json(body), e); });
  r.post_json("/detokenize", [](const ordered_json& body, Engine& e) { return detokenize_response(json(body), e); });
  r.post_json("/apply-template", [this](const ordered_json& body, Engine&) { return apply_template_response(body, *chat_template_); });
  r.post_json("/v1/embeddings", [model](const ordered_json& body, Engine& e) { return openai_embeddings(json(body), e, model); });
  r.post_json("/embeddings", [](const ordered_json& body, Engine& e) { return native_embeddings(json(body), e); });
  r.post_json("/v1/messages/count_tokens", [this](const ordered_json& body, Engine&) { return count_tokens_response(body, *chat_template_); });
  r.post_generation("/v1/completions", [model, now](const ordered_json& body, Engine& e, const PromptTemplate& t, uint64_t id) { return completions_answer(body, false, e, t, {fmt::format("cmpl-{}", id), model, now(), false}); });
  r.post_generation("/v1/chat/completions", [model, now](const ordered_json& body, Engine& e, const PromptTemplate& t, uint64_t id) { return completions_answer(body, true, e, t, {fmt::format("chatcmpl-{}", id), model, now(), true}); });
  r.post_generation("/v1/responses", [model, now](const ordered_json& body, Engine& e, const PromptTemplate& t, uint64_t id) { return responses_answer(body, e, t, {fmt::format("resp_{}", id), model, now(), true}); });
  r.post_generation("/v1/messages", [model, now](const ordered_json& body, Engine& e, const PromptTemplate& t, uint64_t id) { return messages_answer(body, e, t, {fmt::format("msg_{}", id), model, now(), true}); });
}

// Auth, readiness and draining, before any route runs (the connection
// layer checked them already, before reading the body; this is for a state
// that changed since), and the error answers.
void HttpServer::checks() {
  httplib::Server& s = *server_;
  // Auth, readiness and draining, before any route runs (the connection
  // layer checked them already, before reading the body; this is for a
  // state that changed since). The connection closes after such an answer.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/health" || is_webui_request(options_.webui, req.method, req.path))
      return httplib::Server::HandlerResponse::Unhandled;
    if (!options_.api_key.empty()) {
      const std::string auth = req.get_header_value("Authorization"), x_api_key = req.get_header_value("x-api-key");
      if (auth != "Bearer " + options_.api_key && x_api_key != options_.api_key) {
        send_json(res, 401, error_json(req.path, 401, auth.empty() && x_api_key.empty() ? kNoKeyMessage : "Incorrect API key provided.",
                                       "invalid_request_error", {}, "invalid_api_key"));
        close_after_response();
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (engine_.load() == nullptr || draining_) {
      close_after_response();
      res.set_header("Retry-After", "1");  // a proxy retries it elsewhere (deploy/haproxy.cfg)
      send_json(res, 503, error_json(req.path, 503, draining_ ? "The server is shutting down." : "Loading model", "unavailable_error"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (is_generation_path(req.path) && !engine_.load()->generates_text()) {
      send_json(res, 501, error_json(req.path, 501,
                                     fmt::format("The model ({}) is an encoder: it computes embeddings and generates no "
                                                 "text. Use /v1/embeddings.",
                                                 engine_.load()->file().architecture()),
                                     "not_supported_error"));
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
      send_json(res, res.status,
                error_json(req.path, res.status,
                           known ? fmt::format("Method {} is not allowed on {}.", req.method, req.path)
                                 : fmt::format("Unknown request URL: {} {}. Please check the URL for typos.", req.method, req.path),
                           "invalid_request_error", {}, known ? "method_not_allowed" : "unknown_url"));
    } else {
      send_json(res, res.status, error_body(fmt::format("HTTP status {}", res.status), "invalid_request_error"));
    }
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      send_json(res, e.status, error_json(req.path, e.status, e.what(), e.type, e.param, e.code));
    } catch (const std::exception& e) {
      send_json(res, 500, error_json(req.path, 500, e.what(), "server_error"));
    } catch (...) {
      send_json(res, 500, error_json(req.path, 500, "unknown error", "server_error"));
    }
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    record_status(res.status);
    metrics_.request_done(endpoint_label(req.path), res.status);
  });

}

}  // namespace vtc::serve
