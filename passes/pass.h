// The pass interface shared by every pass and the PassManager.
//
// A pass rewrites a module in place and says whether it changed it. It never
// verifies, dumps or times itself: the pipeline owns that (DESIGN.md, Style:
// XLA). Passes that compute something beside the IR (a transfer report, a
// memory plan, a state-slot table) publish it in the PassContext as an
// Artifact: a named block of text lines the manager prints as `//` comments
// after the module, so `vtc opt` output and dumps still parse as IR.
#pragma once

#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"
#include "support/target.h"

namespace vtc::passes {

// `name{key=value,...}` options of one pipeline element, in text form.
struct PassOptions {
  std::map<std::string, std::string> values;
  bool has(std::string_view key) const { return values.count(std::string(key)) != 0; }
  std::string get(std::string_view key, std::string fallback = {}) const;
  int64_t get_int(std::string_view key, int64_t fallback) const;  // throws vtc::Error if malformed
  // `target=cpu|cuda` through parse_target (support/target.h), or `fallback`
  // when absent; throws vtc::Error prefixed by `pass` for a bad name.
  Target get_target(std::string_view pass, Target fallback) const;
};

struct Artifact {
  std::string pass;                // producer
  std::vector<std::string> lines;  // printed as "// " + line
};

struct PassContext {
  // Human-readable notes (one line each) the manager prints as they come,
  // e.g. every transfer the placement pass inserts.
  std::vector<std::string> remarks;
  // Keyed by artifact name ("memory-plan", "bind-state", "placement").
  // The manager drops all artifacts when a later pass changes the module,
  // since they describe the IR as it was.
  std::map<std::string, Artifact> artifacts;
  // Where passes on the rewrite driver log each pattern application
  // (--debug-passes); null when off.
  std::ostream* debug_log = nullptr;
};

// For passes that take no options: throws vtc::Error naming the pass and
// the first option if any were given.
void require_no_options(std::string_view pass, const PassOptions& options);

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  // Returns true iff the module changed. Throws vtc::Error on bad input.
  virtual bool run(ir::Module& module, PassContext& context) = 0;
};

}  // namespace vtc::passes
