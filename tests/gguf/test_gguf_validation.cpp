// One malformed-file test per validation rule of the GGUF reader (see
// docs/gguf.md). Each checks that the error names the field and the byte
// offset where the problem is.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "frontends/gguf/gguf.h"
#include "support/error.h"
#include "tests/gguf/raw_gguf.h"

using vtc::gguf::GgufFile;
using vtc::test::RawGguf;

namespace {

std::string parse_error(const RawGguf& raw) {
  try {
    GgufFile::parse(raw.bytes, "bad.gguf");
  } catch (const vtc::Error& e) {
    return e.what();
  }
  return "<no error>";
}

// A valid file with one key and two f32 tensors of 8 elements each.
RawGguf valid_file() {
  RawGguf g;
  g.header(2, 1);
  g.kv_u32("general.alignment", 32);
  g.tensor("a", {8}, 0, 0);
  g.tensor("b", {8}, 0, 32);
  g.pad();
  g.zeros(64);
  return g;
}

}  // namespace

TEST_CASE("the valid baseline parses", "[gguf][validation]") {
  auto f = GgufFile::parse(valid_file().bytes);
  CHECK(f.tensors().size() == 2);
  CHECK(f.tensors()[1].offset == 32);
  CHECK(f.alignment() == 32);
}

TEST_CASE("bad magic is named with its bytes", "[gguf][validation]") {
  RawGguf g = valid_file();
  g.bytes[0] = 'X';
  auto msg = parse_error(g);
  CHECK_THAT(msg, Catch::Contains("magic at byte 0") && Catch::Contains("XGUF"));
}

TEST_CASE("unsupported versions are rejected", "[gguf][validation]") {
  for (uint32_t version : {1u, 4u, 0u}) {
    RawGguf g;
    g.header(0, 0, version);
    auto msg = parse_error(g);
    CHECK_THAT(msg, Catch::Contains("version at byte 4") &&
                        Catch::Contains(fmt::format("unsupported GGUF version {}", version)));
  }
}

TEST_CASE("big-endian files are named as such", "[gguf][validation]") {
  RawGguf g;
  g.header(0, 0, __builtin_bswap32(3));
  CHECK_THAT(parse_error(g), Catch::Contains("big-endian") && Catch::Contains("byte 4"));
}

TEST_CASE("truncation anywhere is an error, never a crash", "[gguf][validation]") {
  RawGguf full = valid_file();
  for (size_t len = 0; len < full.bytes.size(); ++len) {
    RawGguf cut;
    cut.bytes.assign(full.bytes.begin(), full.bytes.begin() + len);
    auto msg = parse_error(cut);
    INFO("truncated to " << len << " bytes: " << msg);
    CHECK_THAT(msg, Catch::Contains("truncated") && Catch::Contains("bad.gguf: "));
  }
}

TEST_CASE("counts that cannot fit in the file are rejected before allocating", "[gguf][validation]") {
  SECTION("tensor count") {
    RawGguf g;
    g.header(uint64_t(1) << 60, 0);
    CHECK_THAT(parse_error(g), Catch::Contains("tensor_count at byte 8") && Catch::Contains("cannot fit"));
  }
  SECTION("key/value count") {
    RawGguf g;
    g.header(0, 1000);
    CHECK_THAT(parse_error(g), Catch::Contains("metadata_kv_count at byte 16") && Catch::Contains("cannot fit"));
  }
  SECTION("array length") {
    RawGguf g;
    g.header(0, 1);
    g.str("tokens");
    g.u32(9);   // array
    g.u32(8);   // of strings
    size_t at = g.u64(uint64_t(1) << 62);
    CHECK_THAT(parse_error(g), Catch::Contains(fmt::format("tokens (array length) at byte {}", at)) &&
                                   Catch::Contains("cannot fit"));
  }
  SECTION("string length") {
    RawGguf g;
    g.header(0, 1);
    size_t at = g.u64(uint64_t(1) << 40);  // key length
    g.zeros(16);
    CHECK_THAT(parse_error(g), Catch::Contains(fmt::format("metadata key #0 at byte {}", at)) &&
                                   Catch::Contains("exceeds"));
  }
}

TEST_CASE("unknown types are rejected", "[gguf][validation]") {
  SECTION("tensor type") {
    RawGguf g;
    g.header(1, 0);
    g.str("w");
    g.u32(1);
    g.u64(32);
    size_t at = g.u32(4);  // 4 was Q4_2, removed from ggml
    g.u64(0);
    g.pad();
    g.zeros(128);
    CHECK_THAT(parse_error(g), Catch::Contains(fmt::format("tensor 'w' at byte {}", at)) &&
                                   Catch::Contains("unknown tensor type 4"));
  }
  SECTION("metadata value type") {
    RawGguf g;
    g.header(0, 1);
    g.str("k");
    size_t at = g.u32(13);
    CHECK_THAT(parse_error(g), Catch::Contains(fmt::format("k at byte {}", at)) &&
                                   Catch::Contains("unknown metadata value type 13"));
  }
}

TEST_CASE("tensor placement: bounds, overlap, alignment", "[gguf][validation]") {
  SECTION("out of bounds") {
    RawGguf g;
    g.header(1, 0);
    g.tensor("w", {16}, 0, 0);
    size_t offset_at = g.pos() - 8;
    g.pad();
    g.zeros(32);  // 16 f32 need 64 bytes
    CHECK_THAT(parse_error(g), Catch::Contains(fmt::format("tensor 'w' offset at byte {}", offset_at)) &&
                                   Catch::Contains("out of bounds"));
  }
  SECTION("overlapping") {
    RawGguf g;
    g.header(2, 0);
    g.tensor("a", {16}, 0, 0);
    g.tensor("b", {8}, 0, 32);  // a covers [0, 64)
    size_t offset_at = g.pos() - 8;
    g.pad();
    g.zeros(96);
    CHECK_THAT(parse_error(g), Catch::Contains(fmt::format("tensor 'b' offset at byte {}", offset_at)) &&
                                   Catch::Contains("overlaps tensor 'a'"));
  }
  SECTION("misaligned") {
    RawGguf g;
    g.header(1, 0);
    g.tensor("w", {8}, 0, 4);
    size_t offset_at = g.pos() - 8;
    g.pad();
    g.zeros(64);
    CHECK_THAT(parse_error(g), Catch::Contains(fmt::format("tensor 'w' offset at byte {}", offset_at)) &&
                                   Catch::Contains("not aligned to 32"));
  }
  SECTION("dims[0] not a whole number of blocks") {
    RawGguf g;
    g.header(1, 0);
    g.tensor("q", {48}, 8, 0);  // q8_0 blocks are 32
    g.pad();
    g.zeros(64);
    CHECK_THAT(parse_error(g), Catch::Contains("not a multiple of the q8_0 block size 32"));
  }
}

TEST_CASE("duplicates are rejected", "[gguf][validation]") {
  SECTION("keys") {
    RawGguf g;
    g.header(0, 2);
    g.kv_u32("k", 1);
    size_t at = g.kv_u32("k", 2);
    CHECK_THAT(parse_error(g), Catch::Contains(fmt::format("metadata key at byte {}", at)) &&
                                   Catch::Contains("duplicate key 'k'"));
  }
  SECTION("tensor names") {
    RawGguf g;
    g.header(2, 0);
    g.tensor("w", {8}, 0, 0);
    size_t at = g.tensor("w", {8}, 0, 32);
    g.pad();
    g.zeros(64);
    CHECK_THAT(parse_error(g), Catch::Contains(fmt::format("tensor name at byte {}", at)) &&
                                   Catch::Contains("duplicate tensor name 'w'"));
  }
}

TEST_CASE("dimension products that overflow are rejected", "[gguf][validation]") {
  RawGguf g;
  g.header(1, 0);
  g.str("w");
  g.u32(3);
  g.u64(uint64_t(1) << 32);
  size_t dim_at = g.u64(uint64_t(1) << 32);
  g.u64(4);
  g.u32(0);
  g.u64(0);
  CHECK_THAT(parse_error(g), Catch::Contains(fmt::format("tensor 'w' at byte {}", dim_at)) &&
                                 Catch::Contains("overflows int64"));
}

TEST_CASE("other structural rules", "[gguf][validation]") {
  SECTION("too many dims") {
    RawGguf g;
    g.header(1, 0);
    g.str("w");
    size_t at = g.u32(5);
    g.zeros(64);
    CHECK_THAT(parse_error(g), Catch::Contains(fmt::format("tensor 'w' at byte {}", at)) &&
                                   Catch::Contains("5 dimensions"));
  }
  SECTION("alignment not a power of two") {
    RawGguf g;
    g.header(0, 1);
    g.kv_u32("general.alignment", 24);
    CHECK_THAT(parse_error(g), Catch::Contains("general.alignment") && Catch::Contains("not a power of two"));
  }
  SECTION("bool that is not 0 or 1") {
    RawGguf g;
    g.header(0, 1);
    g.str("flag");
    g.u32(7);
    size_t at = g.put<uint8_t>(2);
    CHECK_THAT(parse_error(g), Catch::Contains(fmt::format("flag at byte {}", at)) &&
                                   Catch::Contains("not 0 or 1"));
  }
  SECTION("arrays nested too deep") {
    RawGguf g;
    g.header(0, 1);
    g.str("deep");
    g.u32(9);
    for (int i = 0; i < 40; ++i) {
      g.u32(9);  // element type: array
      g.u64(1);
    }
    CHECK_THAT(parse_error(g), Catch::Contains("nested deeper than 16"));
  }
}
