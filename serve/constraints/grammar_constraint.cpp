#include "serve/constraints/grammar_constraint.h"

#include <fmt/format.h>

#include <optional>

#include "serve/api/common/api_error.h"
#include "serve/constraints/grammar/grammar.h"
#include "serve/constraints/grammar/matcher.h"

namespace vtc::serve {

namespace {

class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const grammar::Grammar> g, std::shared_ptr<const grammar::TokenTable> t)
      : matcher_(std::move(g), std::move(t)) {}
  void mask(std::span<float> logits) override { matcher_.mask_logits(logits.data(), logits.size()); }
  bool accept(int32_t token) override { return matcher_.accept(token); }
  bool finished() const override { return matcher_.finished(); }

 private:
  grammar::GrammarMatcher matcher_;
};

// Unconstrained until the generated text contains the trigger; from there
// on, the grammar holds what follows it. Text after the trigger that the
// grammar rejects (the model wrote the marker in prose) drops the match,
// and the constraint waits for the next trigger.
class LazyGrammarConstraint final : public TokenConstraint {
 public:
  LazyGrammarConstraint(std::shared_ptr<const grammar::Grammar> g, std::shared_ptr<const grammar::TokenTable> t,
                        std::string trigger)
      : grammar_(std::move(g)), tokens_(std::move(t)), trigger_(std::move(trigger)) {}
  void mask(std::span<float> logits) override {
    if (matcher_) matcher_->mask_logits(logits.data(), logits.size());
  }
  bool accept(int32_t token) override {
    if (matcher_) return matcher_->accept(token);
    if (token < 0 || size_t(token) >= tokens_->size()) return true;
    seen_ += tokens_->piece(token);
    const size_t at = seen_.find(trigger_);
    if (at == std::string::npos) {
      if (seen_.size() > trigger_.size()) seen_.erase(0, seen_.size() - trigger_.size());
      return true;
    }
    matcher_.emplace(grammar_, tokens_);
    if (!matcher_->accept_bytes(seen_.substr(at + trigger_.size()))) matcher_.reset();
    seen_.clear();
    return true;
  }
  bool finished() const override { return matcher_ && matcher_->finished(); }

 private:
  std::shared_ptr<const grammar::Grammar> grammar_;
  std::shared_ptr<const grammar::TokenTable> tokens_;
  std::string trigger_, seen_;
  std::optional<grammar::GrammarMatcher> matcher_;
};

}  // namespace

std::shared_ptr<TokenConstraint> grammar_constraint(const GrammarRequest& request, const Engine& engine) {
  std::shared_ptr<const grammar::Grammar> g;
  try {
    g = grammar::parse_gbnf(request.gbnf);
  } catch (const grammar::GrammarError& e) {
    throw ApiError(400, fmt::format("grammar: {}", e.what()), "grammar");
  }
  if (!request.trigger.empty())
    return std::make_shared<LazyGrammarConstraint>(std::move(g), engine.token_table(), request.trigger);
  return std::make_shared<GrammarConstraint>(std::move(g), engine.token_table());
}

}  // namespace vtc::serve
