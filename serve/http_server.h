// The HTTP front of `vtc serve` (cpp-httplib): routes, API-key check,
// OpenAI-shaped errors, SSE streaming, client-disconnect cancellation.
//
// The server listens before the model is loaded, so GET /health answers
// 503 while loading and 200 once set_engine() is called; every other
// endpoint answers 503 until then. Each request runs on a pool thread that
// submits to the Engine and waits for its events. Non-streaming responses
// are sent chunked too, so the handler can see a closed connection while it
// waits (httplib's is_writable) and cancel the request; streaming ones also
// send SSE comment lines while nothing else is due, for the same reason.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "serve/engine.h"
#include "serve/metrics.h"

namespace httplib {
class Server;
}

namespace vtc::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;       // empty: no authentication
  std::string model_name;    // the id /v1/models reports
  std::string chat_template; // a template name or Jinja text for detect_chat_template
  int http_threads = 64;
};

class HttpServer {
 public:
  HttpServer(const HttpOptions& options, Metrics& metrics);
  ~HttpServer();

  // Binds; throws vtc::Error when the address is taken. Returns the port
  // (useful with port 0).
  int bind();
  // Serves until stop(); call on its own thread.
  void listen();
  void set_engine(Engine* engine, const std::string& chat_template);
  // New requests get 503 from now on (draining before shutdown).
  void drain() { draining_ = true; }
  void stop();

 private:
  void routes();

  HttpOptions options_;
  Metrics& metrics_;
  std::unique_ptr<httplib::Server> server_;
  std::atomic<Engine*> engine_{nullptr};
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace vtc::serve
