// Helpers for tests that drive serve::Engine directly.
#pragma once

#include <chrono>
#include <thread>

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

}  // namespace vtc::test
