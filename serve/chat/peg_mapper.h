// Turns the tagged AST of one parse (chat/peg.h) into a ParsedMessage.
//
// Walks the nodes depth first, in input order, and reacts to the tags the
// family grammars put on spans (the llama.cpp reference's chat mapper
// semantics): "reasoning" and "content" spans are appended; "tool-open"
// starts a call, "tool-name" names it (the call is listed from then on, so
// a streaming client sees it early), "tool-id" gives the format's own id,
// "tool-args" is a whole JSON arguments text, and the tagged-argument tags
// ("tool-arg-name", "tool-arg-value", "tool-arg-string-value",
// "tool-arg-close") assemble a JSON object one argument at a time: string
// values are JSON-escaped, other values pass through with Python literals
// (True/False/None, single quotes) turned into JSON. "tool-close" closes
// unbalanced braces and marks the call complete. Whitespace-only reasoning
// is dropped.
#pragma once

#include <vector>

#include "serve/chat/output_parser.h"
#include "serve/chat/peg.h"

namespace vtc::chat {

// A parsed message plus, per tool call, whether its closing was parsed
// (the streaming parser only emits complete calls).
struct MappedMessage {
  ParsedMessage message;
  std::vector<bool> call_closed;
};

MappedMessage map_ast(const peg::Context& ctx, const peg::Result& result);

}  // namespace vtc::chat
