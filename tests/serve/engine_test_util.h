// Helpers for tests that drive serve::Engine directly.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "serve/engine/engine.h"

namespace vtc::test {

// The scheduler publishes its gauges after the step that finished the last
// request; wait (up to 2 s) for that, then return them.
inline serve::EngineGauges idle_gauges(serve::Engine& engine) {
  for (int i = 0; i < 200; ++i) {
    auto g = engine.gauges();
    if (g.running == 0 && g.queue_depth == 0) return g;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return engine.gauges();
}

// Polls r until it has finished (returns true) or has sent `at_least`
// events (returns false), appending them to `events`. A request that sends
// nothing for `stall` throws, so a stalled engine (a step that leaves every
// request out never ends them) fails the test with how far it got instead
// of hanging it until ctest's timeout.
inline bool poll_progress(serve::Request& r, std::vector<serve::TokenEvent>& events, size_t at_least = SIZE_MAX,
                          std::chrono::seconds stall = std::chrono::seconds(120)) {
  size_t seen = events.size();
  auto last_progress = std::chrono::steady_clock::now();
  for (;;) {
    if (r.poll(events, std::chrono::milliseconds(100))) return true;
    if (events.size() >= at_least) return false;
    const auto now = std::chrono::steady_clock::now();
    if (events.size() > seen) seen = events.size(), last_progress = now;
    if (now - last_progress > stall)
      throw std::runtime_error("request stalled: no token for " + std::to_string(stall.count()) + " s after " +
                               std::to_string(seen) + " tokens");
  }
}

// Every event of r, once it has finished (see poll_progress).
inline std::vector<serve::TokenEvent> drain(serve::Request& r) {
  std::vector<serve::TokenEvent> events;
  poll_progress(r, events);
  return events;
}

}  // namespace vtc::test
