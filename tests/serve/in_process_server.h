// The engine and the HTTP routes in this process, on a free loopback port,
// with the template `vtc serve` picks for a model that has none (chatml) or
// a Jinja template file: for API tests that need no child process.
#pragma once

#include <catch2/catch.hpp>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>

#include "serve/chat/chat_prompt.h"
#include "serve/engine/engine.h"
#include "serve/http/server.h"
#include "serve/engine/metrics.h"

namespace vtc::test {

struct InProcessServer {
  serve::Metrics metrics;
  serve::Engine engine;
  serve::HttpServer http;
  int port = 0;
  std::thread listener;

  // template_file: a Jinja chat template (default: the built-in chatml).
  InProcessServer(const std::string& model, const std::string& model_name, const std::string& template_file = "")
      : engine(engine_options(model), metrics), http(http_options(model_name), metrics) {
    port = http.bind();
    listener = std::thread([this] { http.listen(); });
    http.set_engine(&engine, serve::PromptTemplate::load(engine.file(), engine.tokenizer(),
                                                         template_file.empty() ? "chatml" : "", template_file));
    // stop() before the listener runs would leave it listening: wait for it.
    httplib::Client c("127.0.0.1", port);
    for (int i = 0; i < 400 && !c.Get("/health"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~InProcessServer() {
    http.stop();
    listener.join();
  }

  static serve::EngineOptions engine_options(const std::string& model) {
    serve::EngineOptions o;
    o.model = model;
    o.threads = 2;
    o.parallel = 2;
    return o;
  }
  static serve::HttpOptions http_options(const std::string& model_name) {
    serve::HttpOptions o;
    o.port = 0;
    o.model_name = model_name;
    return o;
  }

  // The status and the raw body (-1 when there was no answer).
  std::pair<int, std::string> post_raw(const std::string& path, const nlohmann::json& body) const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    auto res = c.Post(path.c_str(), body.dump(), "application/json");
    if (!res) return {-1, ""};
    return {res->status, res->body};
  }
  // The parsed body of a reply that must have status `expect`.
  nlohmann::json post(const std::string& path, const nlohmann::json& body, int expect) const {
    auto [status, raw] = post_raw(path, body);
    INFO(path << " " << body.dump() << " -> " << status << " " << raw);
    REQUIRE(status == expect);
    return nlohmann::json::parse(raw);
  }
};

}  // namespace vtc::test
