// n > 1: the generations behind one response. Choice 0 is submitted at
// once, the other n - 1 once choice 0 has its first token (its prompt's
// full KV pages are then in the prefix cache, and the others share them),
// each seeded with the request's seed + its index and given its own
// constraint (a grammar's matcher holds per-generation state).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "serve/engine/engine.h"

namespace vtc::serve {

class Choices {
 public:
  // Makes choice i's constraint (i >= 1; choice 0 brings its own in
  // `params`); empty when the request has none.
  using ConstraintFactory = std::function<std::shared_ptr<TokenConstraint>()>;

  Choices(Engine& engine, GenerationParams params, int32_t n, ConstraintFactory constraint = {});
  explicit Choices(std::shared_ptr<Request> submitted);  // n = 1, already submitted
  // Submits choices 1..n-1 when choice 0 is past its prompt; call while waiting.
  void submit_rest(Engine& engine);
  void cancel(Engine& engine);
  const std::vector<std::shared_ptr<Request>>& requests() const { return requests_; }
  int32_t n() const { return n_; }  // choices in all, submitted or not
  // Every submitted choice has finished (false while some are unsubmitted).
  bool all_finished() const;

 private:
  GenerationParams params_;
  ConstraintFactory constraint_;
  int32_t n_;
  std::vector<std::shared_ptr<Request>> requests_;
};

}  // namespace vtc::serve
