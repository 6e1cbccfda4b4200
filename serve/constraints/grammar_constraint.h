// The token constraint behind structured output and tool calls: a GBNF
// grammar (serve/constraints/grammar) held over the engine's vocabulary.
//
// The constraint masks every token the grammar does not allow before each
// draw (the host sampler: such requests never use device sampling) and
// advances over the drawn one; generation stops when nothing can follow.
// With a trigger, it applies only from the first occurrence of the trigger
// text on (tool_choice auto: a tool call, once started, is held to its
// schema; the text before is free). Where a request's grammar comes from
// is the API's business (serve/api/common/structured_output.h).
#pragma once

#include <memory>
#include <string>

#include "serve/engine/engine.h"

namespace vtc::serve {

struct GrammarRequest {
  std::string gbnf, trigger;
};

// A TokenConstraint over the grammar for the engine's vocabulary (its token
// table is built once per engine and shared). ApiError 400 when the
// grammar does not parse.
std::shared_ptr<TokenConstraint> grammar_constraint(const GrammarRequest& request, const Engine& engine);

}  // namespace vtc::serve
