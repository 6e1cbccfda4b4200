// vtc-chat-ref schema: the llama.cpp reference's JSON-schema-to-grammar
// (common/json-schema-to-grammar.h) as an oracle for vtc's
// (serve/constraints/grammar/json_schema.h).
//
//   vtc-chat-ref schema SCHEMA.json
//
// Output: the GBNF grammar json_schema_to_grammar(schema, force_gbnf=true)
// returns, exactly, on stdout, exit 0. A schema the reference refuses: its
// message on stderr, exit 1. Bad arguments or unreadable files: exit 2.
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>

#include "json-schema-to-grammar.h"
#include "json.h"

int cmd_schema(int argc, char** argv) {
  if (argc != 1) {
    std::fprintf(stderr, "usage: vtc-chat-ref schema SCHEMA.json\n");
    return 2;
  }
  std::ifstream in(argv[0], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "vtc-chat-ref schema: cannot read %s\n", argv[0]);
    return 2;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    const common_json schema = common_json::parse(ss.str());
    const std::string grammar = json_schema_to_grammar(schema, /*force_gbnf=*/true);
    std::fwrite(grammar.data(), 1, grammar.size(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vtc-chat-ref schema: %s\n", e.what());
    return 1;
  }
}
