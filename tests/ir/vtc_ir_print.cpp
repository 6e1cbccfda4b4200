// vtc-ir-print: the golden-test driver. Reads a .vtcir file, optionally
// splits it into cases at lines "// -----", and for each case parses,
// optionally verifies, and prints the module. Errors (parse or verify) are
// printed as "error: ..." on stdout so FileCheck can match them; the case
// separator is echoed between outputs. Every printed module is parsed
// again and compared structurally: a mismatch is a printer/parser bug and
// makes the tool exit 2. `vtc-ir-print --attr-table` prints the attribute
// table of docs/ir.md from ir/op_attrs.def instead.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ir/op_attrs.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/error.h"

namespace {

using Case = vtc::ir::SourceCase;

// Returns false on a round-trip mismatch.
bool run_case(const Case& c, bool verify) {
  vtc::ir::Module m;
  try {
    m = vtc::ir::parse(c.text, {c.first_line});
  } catch (const vtc::Error& e) {
    std::cout << e.what() << "\n";  // already "LINE:COL: error: ..."
    return true;
  }
  if (verify) {
    auto errors = vtc::ir::verify_all(m);
    for (const auto& e : errors) std::cout << "error: " << e << "\n";
    if (!errors.empty()) return true;
  }
  std::string printed = vtc::ir::print(m);
  std::cout << printed;
  try {
    std::string why;
    vtc::ir::Module again = vtc::ir::parse(printed);
    if (!vtc::ir::structurally_equal(m, again, &why) || vtc::ir::print(again) != printed) {
      std::cerr << "vtc-ir-print: round trip mismatch: " << why << "\n";
      return false;
    }
  } catch (const vtc::Error& e) {
    std::cerr << "vtc-ir-print: printed text does not parse: " << e.what() << "\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bool verify = false, split = false;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--attr-table") {
      std::cout << vtc::ir::attribute_table_markdown();
      return 0;
    }
    if (a == "--verify") verify = true;
    else if (a == "--split-input-file") split = true;
    else path = a;
  }
  if (path.empty()) {
    std::cerr << "usage: vtc-ir-print [--verify] [--split-input-file] FILE | --attr-table\n";
    return 1;
  }
  std::ifstream in(path);
  if (!in) {
    std::cerr << "vtc-ir-print: cannot open " << path << "\n";
    return 1;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  bool ok = true;
  auto cases = vtc::ir::split_source_cases(buffer.str(), split);
  for (size_t i = 0; i < cases.size(); ++i) {
    if (i) std::cout << "// -----\n";
    ok = run_case(cases[i], verify) && ok;
  }
  return ok ? 0 : 2;
}
