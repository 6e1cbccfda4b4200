// docs/ir.md documents every op of the table (a "### mnemonic" heading in
// its "## Ops" section) and nothing else, and its attribute table is the
// declaration's, so the two cannot drift.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "ir/op_attrs.h"
#include "ir/op_info.h"

using namespace vtc::ir;

TEST_CASE("docs/ir.md has a section for exactly the ops in the table", "[ir][docs]") {
  std::ifstream in(VTC_SOURCE_DIR "/docs/ir.md");
  REQUIRE(in);
  std::set<std::string> documented;
  bool in_ops = false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_ops = line == "## Ops";
    if (in_ops && line.rfind("### ", 0) == 0) documented.insert(line.substr(4));
  }
  std::set<std::string> table;
  for (const auto& op : all_ops()) table.insert(std::string(op.mnemonic));
  for (const auto& name : table) {
    INFO("op in ops.def without a docs/ir.md section: " << name);
    CHECK(documented.count(name));
  }
  for (const auto& name : documented) {
    INFO("docs/ir.md section for an op not in ops.def: " << name);
    CHECK(table.count(name));
  }
}

// The "## Attributes" table of docs/ir.md is the op_attrs.def declaration
// as attribute_table_markdown() prints it (`vtc-ir-print --attr-table`
// regenerates it): names, kinds, enum values, required or optional and
// every default.
TEST_CASE("docs/ir.md attribute table matches ir/op_attrs.def", "[ir][docs]") {
  std::ifstream in(VTC_SOURCE_DIR "/docs/ir.md");
  REQUIRE(in);
  std::string table, line;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Attributes";
    if (in_section && line.rfind("|", 0) == 0) table += line + "\n";
  }
  const std::string want = attribute_table_markdown();
  std::istringstream doc_rows(table), want_rows(want);
  std::string doc_row, want_row;
  while (std::getline(want_rows, want_row)) {
    INFO("docs/ir.md's attribute table differs from ir/op_attrs.def (regenerate it with vtc-ir-print --attr-table)");
    REQUIRE(std::getline(doc_rows, doc_row));
    CHECK(doc_row == want_row);
  }
  INFO("docs/ir.md's attribute table has rows ir/op_attrs.def does not declare");
  CHECK(!std::getline(doc_rows, doc_row));
}
