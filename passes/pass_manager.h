// PassManager: builds a pipeline from text and runs it with verification,
// dumping, timing and a no-change check.
//
// Pipeline syntax (docs/passes.md):
//   pipeline := element (',' element)*
//   element  := NAME ['{' [KEY '=' VALUE (',' KEY '=' VALUE)*] '}']
// e.g. "canonicalize,placement{target=cuda},memory-plan{T=512,S=1,R=1},bind-state".
// Names are looked up in the registry (registered_passes()); unknown names
// or options are errors before anything runs.
//
// Running, for each element in order:
//   - skipped (and listed as disabled) if its name is in disabled_passes;
//   - fingerprint the module (its printed text) if the no-change check is on;
//   - run; if it said "changed": ir::verify (an error names the pass) and
//     drop stale artifacts; if it said "no change" but the fingerprint
//     differs: error "pass 'X' reported no change but changed the module";
//   - dump DIR/<step>/NN-<pass>.vtcir for each function if dump_dir is set
//     and the pass name matches dump_pass (NN = 1-based pipeline index; 00
//     is the input).
// The no-change check is on in debug builds (NDEBUG undefined) and whenever
// options.check_no_change is set.
#pragma once

#include <chrono>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace vtc::passes {

struct PipelineElement {
  std::string name;
  PassOptions options;
};
// Throws vtc::Error on malformed text.
std::vector<PipelineElement> parse_pipeline(std::string_view text);

using PassFactory = std::function<std::unique_ptr<Pass>(const PassOptions&)>;
struct PassRegistration {
  std::string name;
  std::string summary;
  PassFactory create;
};
const std::vector<PassRegistration>& registered_passes();
// Throws vtc::Error naming the known passes if `name` is unknown.
std::unique_ptr<Pass> create_pass(const PipelineElement& element);

struct PassManagerOptions {
  std::string dump_dir;                      // empty: no dumps
  std::string dump_pass;                     // ECMAScript regex on pass names; empty: all
  std::vector<std::string> disabled_passes;  // by name
  bool print_timing = false;
  bool check_no_change = false;              // forced on in debug builds
  bool debug_passes = false;                 // log every pattern application (the rewrite driver's)
  std::ostream* log = nullptr;               // remarks and timing; null: std::cerr
};

struct PassRun {
  std::string name;
  bool disabled = false;
  bool changed = false;
  double seconds = 0;
};

class PassManager {
 public:
  explicit PassManager(PassManagerOptions options = {});
  void add(std::unique_ptr<Pass> pass);
  // Parses and appends a textual pipeline.
  void add_pipeline(std::string_view text);
  size_t size() const { return passes_.size(); }
  Pass& pass(size_t i) { return *passes_[i]; }

  // Verifies the input, then runs every pass. Returns true if any pass
  // changed the module. Throws vtc::Error on a verifier failure or a lying
  // pass.
  bool run(ir::Module& module);

  const PassContext& context() const { return context_; }
  PassContext& context() { return context_; }
  const std::vector<PassRun>& runs() const { return runs_; }

 private:
  void dump(const ir::Module& module, size_t index, std::string_view pass_name) const;
  std::ostream& log() const;

  PassManagerOptions options_;
  std::vector<std::unique_ptr<Pass>> passes_;
  PassContext context_;
  std::vector<PassRun> runs_;
};

// The module's printed text followed by the context's artifacts as comments.
std::string print_with_artifacts(const ir::Module& module, const PassContext& context);
// A structural fingerprint: a 64-bit hash of the printed module.
uint64_t fingerprint(const ir::Module& module);

}  // namespace vtc::passes
