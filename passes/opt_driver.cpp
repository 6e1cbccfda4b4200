#include "passes/opt_driver.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "ir/parser.h"
#include "support/error.h"

namespace vtc::passes {
namespace {

using Case = vtc::ir::SourceCase;

}  // namespace

int run_opt(const OptOptions& options, std::ostream& out) {
  std::ifstream in(options.input);
  if (!in) throw Error("cannot open " + options.input);
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto cases = vtc::ir::split_source_cases(buffer.str(), options.split_input_file);
  bool ok = true;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (i) out << "// -----\n";
    PassManagerOptions mo = options.manager;
    if (cases.size() > 1 && !mo.dump_dir.empty()) mo.dump_dir += "/case" + std::to_string(i);
    try {
      ir::Module m = ir::parse(cases[i].text, {cases[i].first_line});
      PassManager pm(mo);
      if (!options.passes.empty()) pm.add_pipeline(options.passes);
      pm.run(m);
      out << print_with_artifacts(m, pm.context());
    } catch (const Error& e) {
      std::string what = e.what();
      out << (what.find("error:") == std::string::npos ? "error: " : "") << what << "\n";
      ok = false;
    }
  }
  return ok || options.split_input_file ? 0 : 1;
}

}  // namespace vtc::passes
