// libFuzzer harness for the GGUF reader: any byte string either parses or
// throws vtc::Error; anything else (a crash, a sanitizer report, an
// unbounded allocation) is a bug. On success it also walks every value and
// tensor byte, so bad bounds show up under ASan. See docs/fuzzing.md.
#include <cstddef>
#include <cstdint>

#include "frontends/gguf/gguf.h"
#include "support/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto file = vtc::gguf::GgufFile::parse({data, size}, "fuzz");
    size_t checksum = 0;
    for (const auto& kv : file.metadata()) checksum += kv.value.to_display(4).size();
    for (const auto& t : file.tensors())
      for (uint64_t i = 0; i < t.n_bytes; i += 97) checksum += t.data[i];
    return checksum == 1 ? 0 : 0;
  } catch (const vtc::Error&) {
    return 0;
  }
}
