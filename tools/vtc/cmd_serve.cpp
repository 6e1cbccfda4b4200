// `vtc serve MODEL`: the OpenAI-compatible HTTP server (docs/serving.md).
// Binds first (so /health says 503 while the model loads), loads the model
// into the engine, then serves until SIGINT/SIGTERM: /health answers 503,
// requests are still served for --drain-delay seconds (a load balancer
// takes the replica out meanwhile), then new ones get 503 while in-flight
// ones finish for --shutdown-timeout seconds, the rest are cancelled, and
// it exits 0. Every failure before ready (the port, the model, its chat
// template, the backend), and a signal during the load, ends the process
// at once with exit code 1 and one line naming the cause.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <csignal>
#include <ctime>
#include <exception>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <pthread.h>
#include <thread>

#include "frontends/gguf/chat_template.h"
#include "serve/chat/chat_prompt.h"
#include "serve/api/embeddings/embeddings.h"
#include "serve/engine/engine.h"
#include "serve/http/server.h"
#include "support/error.h"
#include "tools/vtc/cache_type_option.h"
#include "tools/vtc/spec_option.h"
#include "tools/vtc/commands.h"
#include "tools/vtc/target_option.h"

namespace vtc::cli {
namespace {

struct ServeOptions {
  serve::EngineOptions engine;
  serve::HttpOptions http;
  std::string chat_template, chat_template_file;
  std::string device_sampling = "auto", target = "cpu";
  double shutdown_timeout = 10;
  double drain_delay = 0;
  std::string api_key_file;
  std::string allowed_hosts;
  double max_body_mib = 16;
  CacheTypeFlags cache;
  double checkpoint_mib = -1;  // -1: the engine's default
  SpecFlags spec;
};

// The API key: --api-key, else --api-key-file (first line), else $VTC_API_KEY.
std::string resolve_api_key(const ServeOptions& o) {
  if (!o.http.api_key.empty()) return o.http.api_key;
  if (!o.api_key_file.empty()) {
    std::ifstream in(o.api_key_file);
    if (!in) throw Error(fmt::format("serve: cannot read --api-key-file {}", o.api_key_file));
    std::string key;
    std::getline(in, key);
    while (!key.empty() && (key.back() == '\r' || key.back() == ' ' || key.back() == '\t')) key.pop_back();
    if (key.empty()) throw Error(fmt::format("serve: --api-key-file {} is empty", o.api_key_file));
    return key;
  }
  if (const char* env = std::getenv("VTC_API_KEY"); env && *env) return env;
  return {};
}

std::vector<std::string> split_hosts(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// The model and its chat template, loaded on a thread of their own while
// the calling thread takes SIGINT/SIGTERM: a signal during a long load ends
// the process promptly, and a load that fails ends it with its reason.
struct LoadedModel {
  std::unique_ptr<serve::Engine> engine;                     // null: not loaded
  std::shared_ptr<const serve::PromptTemplate> chat_template;
  std::exception_ptr error;  // why the load failed
  int signal = 0;            // the signal that came first (the loader is left running)
};

LoadedModel load_while_watching_signals(const ServeOptions& o, serve::Metrics& metrics, const sigset_t& signals) {
  auto result = std::make_shared<LoadedModel>();
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread loader([result, done, &o, &metrics] {
    try {
      result->engine = std::make_unique<serve::Engine>(o.engine, metrics);
      result->chat_template = serve::PromptTemplate::load(result->engine->file(), result->engine->tokenizer(),
                                                          o.chat_template, o.chat_template_file);
    } catch (...) {
      result->engine.reset();
      result->error = std::current_exception();
    }
    *done = true;
  });
  // sigtimedwait's tick bounds how late a finished load is noticed.
  while (!*done) {
    const timespec tick{0, 20'000'000};
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      loader.detach();  // still loading; the caller exits without waiting
      LoadedModel interrupted;
      interrupted.signal = sig;
      return interrupted;
    }
  }
  loader.join();
  return std::move(*result);
}

int serve_main(ServeOptions o) {
  // Signals are taken by sigwait on this thread only: block them before any
  // other thread starts, so every thread inherits the mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  o.http.api_key = resolve_api_key(o);
  o.http.allowed_hosts = split_hosts(o.allowed_hosts);
  o.http.max_body_bytes = size_t(o.max_body_mib * 1024 * 1024);
  if (o.http.model_name.empty()) o.http.model_name = std::filesystem::path(o.engine.model).stem().string();
  if (!o.chat_template_file.empty() && !o.chat_template.empty())
    throw Error("serve: --chat-template and --chat-template-file exclude each other");
  o.engine.spec = o.spec.resolve();  // bad flags fail before the port opens
  o.engine.target = parse_target(o.target);
  // Only the cuda target drafts on the device (any model it loads).
  if (o.engine.spec.draft_on == serve::DraftOn::Device && o.engine.target != Target::Cuda)
    throw Error(fmt::format("--draft-on device: the {} target drafts on the host (the device drafter runs on --target "
                            "cuda)", o.target));
  serve::Metrics metrics;
  serve::HttpServer http(o.http, metrics);
  const int port = http.bind();
  std::thread listener([&] { http.listen(); });
  fmt::print(stderr, "serve: listening on http://{}:{} (loading {})\n", o.http.host, port, o.engine.model);

  if (o.device_sampling != "auto") o.engine.device_sampling = o.device_sampling == "on";
  if (o.checkpoint_mib >= 0) o.engine.checkpoint_bytes = uint64_t(o.checkpoint_mib * 1024 * 1024);
  o.engine.cache_type_k = o.cache.k_type();
  o.engine.cache_type_v = o.cache.v_type();
  LoadedModel loaded = load_while_watching_signals(o, metrics, set);
  if (!loaded.engine) {
    // Stop the listener (it may not have started yet: http.stop() copes),
    // then leave: on a signal the loader thread may still be busy, so the
    // process ends without unwinding it.
    http.stop(0);
    listener.join();
    if (loaded.error) std::rethrow_exception(loaded.error);
    fmt::print(stderr, "vtc: error: serve: {} received while loading {}: stopped before ready\n",
               loaded.signal == SIGINT ? "SIGINT" : "SIGTERM", o.engine.model);
    std::fflush(stderr);
    std::_Exit(1);
  }
  auto& engine = loaded.engine;
  auto& chat_template = loaded.chat_template;
  fmt::print(stderr, "serve: chat template: {}\n", chat_template->description());
  if (o.engine.embeddings) {
    std::string_view pooling;
    try {
      pooling = serve::pooling_name(serve::serving_pooling(*engine));  // a file's rank pooling is refused here
    } catch (const Error&) {
      http.stop(0);
      listener.join();
      throw;
    }
    fmt::print(stderr, "serve: embeddings: pooling {}, normalisation {}\n", pooling, o.engine.embd_normalize);
  }
  http.set_engine(engine.get(), chat_template);
  fmt::print(stderr, "serve: {} for {} slots of {} positions\n", describe_kv_memory(engine->kv_memory()), o.engine.parallel,
             engine->n_ctx());
  if (o.engine.spec.mode != serve::SpecMode::Off)
    fmt::print(stderr, "serve: speculative decoding: {}{}, up to {} draft tokens per step ({})\n",
               serve::spec_mode_name(o.engine.spec.mode),
               o.engine.spec.draft_model.empty() ? "" : " with " + o.engine.spec.draft_model, o.engine.spec.draft_max,
               o.engine.spec.adaptive ? "adaptive length" : "--draft-fixed");
  if (auto c = engine->checkpoints())
    fmt::print(stderr, "serve: prefix reuse through checkpoints of the recurrent states: {:.2f} MiB each, up to {:.2f} MiB ({})\n",
               double(c->each) / (1 << 20), double(c->budget) / (1 << 20),
               c->each <= c->budget ? "--cache-checkpoint-mib" : "off: less than one fits --cache-checkpoint-mib");
  fmt::print(stderr, "serve: ready: model '{}', context {}, {} slots, {}\n", o.http.model_name, engine->n_ctx(),
             o.engine.parallel, engine->backend_description());
  std::fflush(stderr);

  int sig = 0;
  sigwait(&set, &sig);
  fmt::print(stderr, "serve: {} received: draining (up to {} s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM", o.shutdown_timeout);
  // /health says 503 at once; with --drain-delay, requests are still served
  // until a load balancer checking /health has stopped sending them (a
  // second signal ends the wait). Then new requests get 503 while in-flight
  // ones finish, and every connection is closed, slow ones included.
  http.leave_rotation();
  if (o.drain_delay > 0) {
    fmt::print(stderr, "serve: /health answers 503; still serving for up to {} s (--drain-delay)\n", o.drain_delay);
    std::fflush(stderr);
    const auto ns = int64_t(o.drain_delay * 1e9);
    const timespec delay{time_t(ns / 1'000'000'000), long(ns % 1'000'000'000)};
    sigtimedwait(&set, nullptr, &delay);
  }
  http.drain();
  fmt::print(stderr, "serve: refusing new requests (503); finishing those in flight\n");
  std::fflush(stderr);
  engine->shutdown(std::chrono::milliseconds(int64_t(o.shutdown_timeout * 1000)));
  http.stop(500);
  listener.join();
  fmt::print(stderr, "serve: stopped\n");
  return 0;
}

}  // namespace

Runner add_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API (docs/serving.md)");
  auto o = std::make_shared<ServeOptions>();
  cmd->add_option("model,-m,--model", o->engine.model, "Model: GGUF file or .vtc artifact (vtc compile)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--host", o->http.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->http.port, "Port (0: any free port, printed at start)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--parallel", o->engine.parallel, "Sequences decoded together (slots)")->capture_default_str()->check(CLI::Range(1, 512));
  cmd->add_option("-c,--ctx-size", o->engine.n_ctx, "Context per sequence (0: the model's, at most 4096)")->capture_default_str();
  add_cache_type_options(cmd, o->cache);
  cmd->add_option("--target", o->target,
                  "Backend: cpu (the interpreter) or cuda (generated kernels; needs an NVIDIA driver and NVRTC). A .vtc "
                  "artifact must be compiled for the same target")
      ->check(target_check())
      ->capture_default_str();
  cmd->add_option("-t,--threads", o->engine.threads, "CPU compute threads (0: all cores)")->capture_default_str();
  cmd->add_option("--device-sampling", o->device_sampling,
                  "Decode rows sampled by the step's own sample op on the backend, ids fed back there: auto (on for "
                  "cuda, off for cpu), on or off. Requests with penalties or logprobs are always sampled on the host; "
                  "speculating ones draw their verify rows on the host, by the sample op's rule when on")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_option("--api-key", o->http.api_key,
                  "Require 'Authorization: Bearer KEY' or 'x-api-key: KEY' (all but /health); visible in ps: prefer --api-key-file or $VTC_API_KEY");
  cmd->add_option("--api-key-file", o->api_key_file, "Read the API key from the first line of FILE")->check(CLI::ExistingFile);
  cmd->add_option("--allowed-hosts", o->allowed_hosts,
                  "Comma-separated Host header names accepted (port ignored; others get 403, /health excepted); default: any");
  cmd->add_flag("--no-webui", [o](int64_t) { o->http.webui = false; },
                "Do not serve the built-in web chat at GET / (served by default, without the API key: the page asks "
                "for it); / is then an unknown URL like any other (404; 401 first without the key when one is set)");
  cmd->add_option("--kv-pages", o->engine.kv_pages, "KV pages of 16 positions in the pool (0: parallel x context)")->capture_default_str();
  add_spec_options(cmd, o->spec);
  cmd->add_option("--cache-checkpoint-mib", o->checkpoint_mib,
                  "Models with recurrent state (Mamba, Gated DeltaNet and LFM2 hybrids...): MiB the prefix cache may hold "
                  "in checkpoints of a slot's recurrent states, which it needs to reuse a cached prompt prefix (host "
                  "memory on cpu, device memory on cuda); least recently used ones are dropped past it. Default: 256, "
                  "or one checkpoint per --parallel slot if larger; 0: no checkpoints, so no prefix reuse for such models")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-step-tokens", o->engine.max_step_tokens, "Tokens per scheduler step")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--weight-layout-types", o->engine.weight_layout_types,
                  "GGUF: which weights the weight-layout pass repacks: reference (q4_0, q4_k: llama.cpp's arithmetic) "
                  "or all (also q8_0 and q6_k)")
      ->capture_default_str()
      ->check(CLI::IsMember({"reference", "all"}));
  cmd->add_flag("--no-weight-layout", [o](int64_t) { o->engine.weight_layout = false; },
                "GGUF: compile without the weight-layout pass (every weight in ggml's rows layout)");
  cmd->add_flag("--no-fused-kernels", [o](int64_t) { o->engine.fused_kernels = false; },
                "Run each fused region's body op by op instead of as one kernel (same bits)");
  cmd->add_flag("--embeddings", o->engine.embeddings,
                "Serve POST /v1/embeddings and /embeddings (a GGUF: also builds the @embed step; completions still work)");
  cmd->add_option("--pooling", o->engine.pooling,
                  "Embeddings pooling: none, mean, cls or last (default: the model's <arch>.pooling_type, else none)")
      ->check(CLI::IsMember({"none", "mean", "cls", "last"}));
  cmd->add_option("--embd-normalize", o->engine.embd_normalize,
                  "Pooled embeddings' normalisation: -1 none, 0 max-abs to the int16 range, 1 taxicab, 2 euclidean, "
                  "p > 2 the p-norm")
      ->capture_default_str()
      ->check(CLI::Range(-1, 64));
  cmd->add_option("--alias", o->http.model_name, "Model id reported by /v1/models (default: the file name)");
  cmd->add_option("--chat-template", o->chat_template,
                  fmt::format("Chat template: a built-in name ({}) or Jinja text (default: the model's tokenizer.chat_template, "
                              "else chatml)", fmt::join(chat_template_names(), ", ")));
  cmd->add_option("--chat-template-file", o->chat_template_file, "Chat template: a Jinja file (overrides the model's)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--shutdown-timeout", o->shutdown_timeout, "Seconds in-flight requests get after SIGINT/SIGTERM")->capture_default_str();
  cmd->add_option("--drain-delay", o->drain_delay,
                  "Seconds after SIGINT/SIGTERM during which /health already answers 503 but requests are still served, "
                  "so a load balancer checking /health stops sending before any is refused (deploy/; a second signal "
                  "ends the wait)")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  auto& h = o->http;
  cmd->add_option("--max-connections", h.max_connections, "Open connections served at once (one thread each); more get 503")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--listen-backlog", h.listen_backlog, "Pending connections the kernel queues")->capture_default_str()->check(CLI::Range(16, 1 << 20));
  cmd->add_option("--max-headers", h.max_headers, "Header lines per request (more: 431)")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-header-size", h.max_header_bytes, "Bytes of request line + headers (more: 431)")->capture_default_str()->check(CLI::Range(1024, 1 << 30));
  cmd->add_option("--max-body-size", o->max_body_mib, "Request body limit in MiB (more: 413, before the body is read)")->capture_default_str()->check(CLI::Range(0.001, 4096.0));
  cmd->add_option("--header-timeout", h.header_timeout, "Seconds from a request's first byte to its complete head (then 408)")->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--read-timeout", h.read_timeout, "Seconds for a request body after its head (then 408)")->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--write-timeout", h.write_timeout, "Seconds a write may wait on a client that does not read (then the request is cancelled)")->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--keep-alive-timeout", h.keep_alive_timeout, "Seconds an open connection may wait idle for its next request")->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--keep-alive-max", h.keep_alive_max, "Requests per connection before it is closed")->capture_default_str()->check(CLI::Range(1, 1 << 30));
  return [o] { return serve_main(*o); };
}

}  // namespace vtc::cli
