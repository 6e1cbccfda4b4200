#include "serve/engine/parallel.h"

namespace vtc::serve {

Choices::Choices(Engine& engine, GenerationParams params, int32_t n, ConstraintFactory constraint)
    : params_(std::move(params)), constraint_(std::move(constraint)), n_(n) {
  requests_.push_back(engine.submit(params_));
}

Choices::Choices(std::shared_ptr<Request> submitted) : n_(1) { requests_.push_back(std::move(submitted)); }

void Choices::submit_rest(Engine& engine) {
  if (int32_t(requests_.size()) == n_) return;
  const Request& first = *requests_[0];
  if (first.completion_tokens() == 0 && first.finish_reason().kind == Finish::None) return;  // still prefilling
  for (int32_t i = 1; i < n_; ++i) {
    GenerationParams p = params_;
    p.sampling.seed += uint64_t(i);
    p.constraint = constraint_ ? constraint_() : nullptr;
    requests_.push_back(engine.submit(std::move(p)));
  }
}

void Choices::cancel(Engine& engine) {
  for (const auto& r : requests_) engine.cancel(r);
}

bool Choices::all_finished() const {
  if (int32_t(requests_.size()) < n_) return false;
  for (const auto& r : requests_)
    if (r->finish_reason().kind == Finish::None) return false;
  return true;
}

}  // namespace vtc::serve
