// libFuzzer harness for the IR parser.
//
// Any input must either parse or throw vtc::Error; never crash. When it
// parses, the module must also survive the verifier and the printer, and
// the printed text must parse back to a structurally equal module that
// prints identically (the round-trip oracle). A violation aborts, which
// libFuzzer reports as a crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  vtc::ir::Module m;
  try {
    m = vtc::ir::parse(text);
  } catch (const vtc::Error&) {
    return 0;
  }
  (void)vtc::ir::verify_all(m);
  std::string printed = vtc::ir::print(m);
  try {
    vtc::ir::Module again = vtc::ir::parse(printed);
    std::string why;
    if (!vtc::ir::structurally_equal(m, again, &why)) {
      std::fprintf(stderr, "round trip changed the module: %s\n%s", why.c_str(), printed.c_str());
      std::abort();
    }
    if (vtc::ir::print(again) != printed) {
      std::fprintf(stderr, "printing is not a fixed point:\n%s", printed.c_str());
      std::abort();
    }
  } catch (const vtc::Error& e) {
    std::fprintf(stderr, "printed module does not parse: %s\n%s", e.what(), printed.c_str());
    std::abort();
  }
  return 0;
}
