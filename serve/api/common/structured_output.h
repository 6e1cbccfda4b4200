// Structured output: the grammar a request's sampling is held to, and the
// token constraint that enforces it (serve/grammar).
//
// Where the grammar comes from, at most one per request (ApiError 400 when
// a request names two, or when the grammar, schema or regex is bad):
//   response_format {"type": "json_object"}            any JSON object
//   response_format {"type": "json_schema",
//                    "json_schema": {"schema": S, ...}} S (strict or not: the
//                                                      grammar always holds it)
//   "json_schema": S        (llama-server's field)     S
//   "grammar": GBNF text    (llama-server's field)     the grammar, root rule "root"
//   "regex": R                                          the whole output matches R
//   tool_choice "required" or a named function          a tool call in the
//                    template family's syntax, arguments held to the tool's
//                    parameters schema (Hermes/Qwen, Llama 3 and Mistral Nemo
//                    families; others: 400)
//   tool_choice "auto" with tools (those families)      free text until the
//                    family's call marker, then the call grammar (lazy)
//   tools on a built-in template (the generic JSON format,  the whole output is
//                    chat/generic_tools.h)                 {"tool_call(s)": ..} or, with
//                                                          "auto", {"response": TEXT}
// The constraint that enforces it: serve/constraints/grammar_constraint.h.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "serve/api/common/completion_request.h"
#include "serve/constraints/grammar_constraint.h"

namespace vtc::serve {

// The grammar the request asks for, or nullopt. `req` carries the chat
// request's template source and tool choice (for tool-call grammars).
std::optional<GrammarRequest> requested_grammar(const nlohmann::ordered_json& body, const CompletionRequest& req);

}  // namespace vtc::serve
