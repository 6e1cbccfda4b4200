// vtc's own Jinja template engine, for model chat templates.
//
// It implements the Jinja2 language as HF transformers' apply_chat_template
// configures it: trim_blocks and lstrip_blocks on, the loopcontrols
// extension ({% break %}, {% continue %}), the {% generation %} block, and
// transformers' globals and filters (raise_exception, strftime_now,
// tojson with json.dumps' separators and key order). Python semantics
// otherwise: str() of True is "True", / is true division, % is Python's
// modulo.
//
//   auto t = vtc::jinja::Template::parse(text);       // throws TemplateError
//   std::string out = t.render(context_json, opts);   // throws TemplateError
//
// Checked byte for byte against the llama.cpp reference's own engine
// (common/jinja, through `vtc-chat-ref render`) on the reference's chat
// templates × a set of conversations (tests/serve/jinja, the template gate).
// Where that engine and Python part on what chat templates do, ours follows
// llama.cpp, so that a model's prompt is the one llama.cpp gives it:
//   - {{ }} prints None, undefined and dicts as nothing, a list as its items
//     one after another (Value::output); str()/|string/~ stay Python's;
//   - floats print as "%f" less trailing zeros ("2.0", "0.333333"), and as
//     "%g" in tojson and |string ("2", "3.14159");
//   - `+` with a string on one side concatenates, and None beside a string
//     in + or ~ is "";
//   - none|default(x) is x;
//   - an attribute or item of undefined is undefined, not an error (Jinja2
//     raises), and undefined.items() / none.items() are [] (the builtins
//     llama.cpp binds on undefined and None; builtins.cpp lists them);
//   - d.items/keys/values/get are the methods even where d has such a key,
//     and an attribute of a function is an error;
//   - no Markup: |safe is str(), |escape a plain string, so "..."|safe + x
//     does not HTML-escape x.
// One extension llama.cpp lacks: |from_json (DeepSeek V3.2/V4 templates
// parse string tool-call arguments with it; llama.cpp's chat layer hands
// them objects instead).
//
// Not supported (no chat template uses them): {% include %}, {% import %},
// {% extends %}/blocks, recursive for loops, autoescaping, *args/**kwargs
// in macros, Unicode case mapping in upper/lower/title (ASCII only).
// Unlike HF's ImmutableSandboxedEnvironment, list.append/pop (which
// llama.cpp's engine has, and the Kimi-K2 templates need) and dict.update
// are allowed.
//
// Every failure — bad syntax, a runtime type error, the template's own
// raise_exception(...) — is a TemplateError naming the template line.
//
// A model file's chat template is untrusted code, so a render is bounded
// (RenderOptions): recursion depth, the size of the output and of any one
// value, and the render's work. Work is counted in steps, each 20-70 ns of
// this engine's time on the 2-core dev VM:
//   - one per node evaluated, kLoopIterationSteps (32) per loop iteration
//     (it builds the loop object);
//   - one per kBytesPerStep (8) bytes written: output, each concatenation
//     (the bytes it copies), each value a filter, test, method or call
//     reads or returns (its size: string bytes, 16 per list item, 32 per
//     dict entry); fresh pages cost ~3.5 ns a byte there, tojson ~5;
//   - one per kScansPerStep (2) elements visited by dict lookups, ==, in
//     and sorting (a string compare counts 64 bytes as one element).
// The budget is max_steps (4M) plus steps_per_context_byte (16) per byte of
// the context (its JSON size): the slowest hostile templates measured stop
// within ~0.25 s with a small context (the doubling loop in 0.1 s), and a
// real conversation, work about linear in its size, keeps >3x headroom
// (the corpus's heaviest, gemma-4, takes 2.4M steps for 400 messages and
// 50 tools: 255 KB, a 8M budget). Past it the render fails with "template
// exceeded its work limit (N steps ...)", a TemplateError like any other
// (the serve layer's 400).
// Concatenation is linear: `s ~ x` appends to s in place when s is its
// buffer's only owner (a temporary, or the variable `{% set s = s ~ x %}`
// assigns to, which gives its reference up first), growing it
// geometrically, so building N bytes by appends copies O(N) bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "support/error.h"

namespace vtc::jinja {

class TemplateError : public vtc::Error {
 public:
  // line is 1-based, 0 when unknown. raised is true for raise_exception().
  TemplateError(const std::string& message, int line, bool raised = false);
  int line() const { return line_; }
  bool raised() const { return raised_; }
  const std::string& bare_message() const { return bare_; }

 private:
  int line_;
  bool raised_;
  std::string bare_;
};

// What a render did, in the units of its work budget (see above).
struct RenderStats {
  uint64_t steps = 0;  // nodes evaluated + loop iterations
  uint64_t bytes = 0;  // bytes written, copied or scanned
  uint64_t scans = 0;  // elements visited by lookups and comparisons
  uint64_t work = 0;   // steps + bytes / kBytesPerStep + scans / kScansPerStep
};

constexpr uint64_t kLoopIterationSteps = 32;
constexpr uint64_t kBytesPerStep = 8;
constexpr uint64_t kScansPerStep = 2;

struct RenderOptions {
  // What strftime_now() formats (seconds since the epoch, UTC); < 0 uses
  // the clock. Tests fix it for reproducible output.
  int64_t now_epoch_s = -1;
  size_t max_output_bytes = size_t{64} << 20;  // the output, and any one value
  int max_depth = 512;                         // nested macro calls / expression depth
  uint64_t max_steps = 4'000'000;              // the work budget, in steps (above),
  uint64_t steps_per_context_byte = 16;        // plus this many per byte of the context
  RenderStats* stats = nullptr;                // when set, filled in, also when the render fails
};

struct Node;

class Template {
 public:
  static Template parse(std::string_view text);
  // The context's top-level keys are the template's variables. Pass an
  // ordered_json to keep object key order (tool schemas in tojson output).
  std::string render(const nlohmann::json& context, const RenderOptions& options = {}) const;
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const Node> root_;
};

}  // namespace vtc::jinja
