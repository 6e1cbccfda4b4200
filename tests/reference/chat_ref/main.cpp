// vtc-chat-ref: the llama.cpp reference's chat layer as a command-line
// oracle for vtc's own implementations (docs/reference.md). It is built
// from the reference's source bundle (libllama-common of the
// test-llama-archs build), never shipped, and never linked into vtc.
//
//   vtc-chat-ref render TEMPLATE.jinja CONTEXT.json    the reference's Jinja engine
//   vtc-chat-ref parse ...                             its tool-call / reasoning parser
//   vtc-chat-ref schema SCHEMA.json                    its JSON-schema-to-grammar
//   vtc-chat-ref apply TEMPLATE.jinja REQUEST.json     its chat layer (the prompt of a request)
//   vtc-chat-ref sample VOCAB.gguf LOGITS [OPTIONS]     its sampler chain (llama-server's) over vtc's logits
//
// Each subcommand lives in its own file; see its header comment for the
// exact arguments and output.
#include <cstdio>
#include <cstring>

int cmd_render(int argc, char** argv);  // render.cpp
int cmd_parse(int argc, char** argv);   // parse.cpp
int cmd_schema(int argc, char** argv);  // schema.cpp
int cmd_apply(int argc, char** argv);   // apply.cpp
int cmd_sample(int argc, char** argv);  // sample.cpp

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: vtc-chat-ref render|parse|schema|apply|sample ARGS...\n");
    return 2;
  }
  const char* cmd = argv[1];
  if (std::strcmp(cmd, "render") == 0) return cmd_render(argc - 2, argv + 2);
  if (std::strcmp(cmd, "parse") == 0) return cmd_parse(argc - 2, argv + 2);
  if (std::strcmp(cmd, "schema") == 0) return cmd_schema(argc - 2, argv + 2);
  if (std::strcmp(cmd, "apply") == 0) return cmd_apply(argc - 2, argv + 2);
  if (std::strcmp(cmd, "sample") == 0) return cmd_sample(argc - 2, argv + 2);
  std::fprintf(stderr, "vtc-chat-ref: unknown command '%s'\n", cmd);
  return 2;
}
