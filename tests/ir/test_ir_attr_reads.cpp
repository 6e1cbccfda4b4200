// Outside ir/, attributes are read only through the typed structs of
// ir/op_attrs.h (RopeAttrs::of(op).n_rot), never by name: a lookup by a
// string literal (the `attr` call with a quoted name) or one of the deleted
// fallback accessors anywhere in the sources fails here, naming the line.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace fs = std::filesystem;

TEST_CASE("no attribute is looked up by name outside ir/", "[ir][attrs]") {
  // Written in pieces so this file does not match itself.
  const std::string quote = "\"";
  const std::regex lookup("(^|[^A-Za-z0-9_])(attr|int_attr|float_attr|str_attr|ints_attr|attr_i|attr_f)\\(" + quote);
  const fs::path root = VTC_SOURCE_DIR;
  std::vector<std::string> hits;
  size_t scanned = 0;
  for (const char* top : {"bench", "codegen", "frontends", "passes", "runtime", "samples", "serve", "support", "tests", "tools"}) {
    if (!fs::exists(root / top)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cc" && ext != ".hpp"))
        continue;
      ++scanned;
      std::ifstream in(entry.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n)
        if (std::regex_search(line, lookup))
          hits.push_back(fs::relative(entry.path(), root).string() + ":" + std::to_string(n) + ": " + line);
    }
  }
  CHECK(scanned > 100);  // the walk found the sources
  for (const auto& hit : hits) {
    INFO("read it through ir/op_attrs.h instead: " << hit);
    CHECK(false);
  }
  CHECK(hits.empty());
}
