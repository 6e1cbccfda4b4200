// docs/ir.md documents every op of the table (a "### mnemonic" heading in
// its "## Ops" section) and nothing else, so the two cannot drift.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

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

TEST_CASE("docs/ir.md attribute lines match the table", "[ir][docs]") {
  // Each op section carries a line "Attributes: `...`" spelling the table's
  // schema, or "Attributes: none".
  std::ifstream in(VTC_SOURCE_DIR "/docs/ir.md");
  REQUIRE(in);
  std::stringstream buf;
  buf << in.rdbuf();
  std::string doc = buf.str();
  for (const auto& op : all_ops()) {
    std::string schema;
    for (const auto& a : op.attrs) {
      std::string kind(attr_kind_name(a.kind));
      if (a.kind == AttrKind::Enum) {
        kind = "enum(";
        for (size_t i = 0; i < a.enum_values.size(); ++i) kind += (i ? "|" : "") + a.enum_values[i];
        kind += ")";
      }
      schema += (schema.empty() ? "" : ", ") + a.name + ":" + kind + (a.optional ? "?" : "");
    }
    std::string want = schema.empty() ? "Attributes: none" : "Attributes: `" + schema + "`";
    auto at = doc.find("\n### " + std::string(op.mnemonic) + "\n");
    REQUIRE(at != std::string::npos);
    auto end = doc.find("\n### ", at + 1);
    std::string section = doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
    INFO(op.mnemonic << ": expected '" << want << "'");
    CHECK(section.find(want) != std::string::npos);
  }
}
