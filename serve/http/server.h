// The HTTP front of `vtc serve`, the only user of cpp-httplib: the
// connection layer (server.cpp) and the router (router.cpp: routes,
// API-key check, OpenAI-shaped errors, SSE streaming, client-disconnect
// cancellation). The connection layer holds the limits
// that keep hostile or unlucky clients from starving or bloating it
// (docs/serving.md, "Deployment and limits").
//
// Requests are parsed and routed by cpp-httplib (Server::process_request),
// but the connection layer is vtc's own (HttpServer::Impl): httplib's
// accept loop hands each socket over, and one thread per open connection
// (up to max_connections) reads each request head and body into a buffer
// under a deadline, with header count / size and body limits, and answers
// 431 / 413 / 403 / 401 / 415 / 503 before any body is read. Only then does
// httplib see the request, from that buffer (so pipelined requests are
// kept), with TCP_NODELAY set and no SO_REUSEPORT.
//
// The server listens before the model is loaded, so GET /health answers
// 503 while loading and 200 once set_engine() is called; every other
// endpoint answers 503 until then, and again after drain(). A non-streaming
// response sends nothing until its body is ready (so a proxy may retry it
// elsewhere if this process dies first), watching the connection meanwhile;
// should the client half-close, it is sent chunked (close-delimited to
// HTTP/1.0 clients) from then on, so a write can tell a gone client and
// cancel the request. Streaming ones send SSE comment lines while nothing
// else is due.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "serve/chat/chat_prompt.h"
#include "serve/engine/engine.h"
#include "serve/engine/metrics.h"

namespace httplib {
class Server;
}

namespace vtc::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;       // empty: no authentication
  bool webui = true;         // GET / serves the built-in web chat (serve/webui; --no-webui)
  std::string model_name;    // the id /v1/models reports
  // Host header names accepted (without the port; "*" or empty: any).
  std::vector<std::string> allowed_hosts;
  int max_connections = 4096;              // open connections (one thread each); more get 503
  int listen_backlog = 1024;               // listen(2) backlog
  int max_headers = 100;                   // header lines per request: more get 431
  size_t max_header_bytes = 64 << 10;      // request line + headers: more get 431
  size_t max_body_bytes = 16 << 20;        // request body: more get 413, unread
  double header_timeout = 10;              // s from a request's first byte to its full head
  double read_timeout = 60;                // s for the body, after the head
  double write_timeout = 30;               // s a blocked write may wait for the client
  double keep_alive_timeout = 5;           // s an open connection may sit idle between requests
  int keep_alive_max = 10000;              // requests per connection, then it is closed
};

class HttpServer {
 public:
  HttpServer(const HttpOptions& options, Metrics& metrics);
  ~HttpServer();

  // Binds; throws vtc::Error naming the address when it is taken. Returns
  // the port (useful with port 0).
  int bind();
  // Serves until stop(); call on its own thread. Returns at once when
  // stop() came first, so a start-up failure never strands a listener.
  void listen();
  void set_engine(Engine* engine, std::shared_ptr<const PromptTemplate> chat_template);
  // /health answers 503 {"status": "draining"} from now on, so a load
  // balancer takes this replica out of rotation; requests are still served
  // (until drain()), each connection closing after its answer.
  void leave_rotation();
  // New requests get 503 + Retry-After from now on (draining before
  // shutdown), and /health as above. Connections are still accepted.
  void drain();
  // Stops accepting, closes idle and half-read connections at once, gives
  // requests still writing up to `grace_ms` to finish, then aborts them.
  void stop(int grace_ms = 500);

  struct Impl;

 private:
  struct Router;  // router.cpp: the endpoint table
  void routes();  // router.cpp
  void checks();  // router.cpp: auth, readiness, error answers

  HttpOptions options_;
  Metrics& metrics_;
  std::shared_ptr<Impl> impl_;
  std::unique_ptr<httplib::Server> server_;
  std::atomic<Engine*> engine_{nullptr};
  std::shared_ptr<const PromptTemplate> chat_template_;  // set with engine_, before it
  std::atomic<bool> draining_{false}, out_of_rotation_{false};
  std::atomic<uint64_t> next_id_{1};
  // The listen()/stop() handshake (server.cpp, above listen()).
  std::mutex listen_mutex_;
  bool listen_entered_ = false, stop_requested_ = false;
  std::atomic<bool> listen_returned_{false};
};

}  // namespace vtc::serve
