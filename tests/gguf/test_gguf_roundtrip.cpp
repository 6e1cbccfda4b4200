// Writer round trip: everything the writer can express is read back equal,
// through memory and through a file.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "frontends/gguf/gguf.h"
#include "support/error.h"
#include "tests/test_process.h"

using namespace vtc;
using namespace vtc::gguf;

namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = uint8_t(rng());
  return out;
}

GgufWriter sample_writer() {
  GgufWriter w;
  w.set_alignment(64);
  w.set("u8", Value(uint8_t{200}));
  w.set("i8", Value(int8_t{-100}));
  w.set("u16", Value(uint16_t{60000}));
  w.set("i16", Value(int16_t{-30000}));
  w.set("u32", Value(uint32_t{4000000000u}));
  w.set("i32", Value(int32_t{-2000000000}));
  w.set("f32", Value(3.25f));
  w.set("bool", Value(true));
  w.set("string", Value(std::string("héllo\nworld")));
  w.set("empty_string", Value(std::string()));
  w.set("u64", Value(uint64_t{18000000000000000000ull}));
  w.set("i64", Value(int64_t{-9000000000000000000ll}));
  w.set("f64", Value(2.5e300));
  w.set("strings", Value::string_array({"a", "", "ccc"}));
  w.set("floats", Value::array(ValueType::F32, {Value(1.0f), Value(-2.0f)}));
  w.set("empty_array", Value::array(ValueType::I32, {}));
  w.set("nested", Value::array(ValueType::ARRAY,
                               {Value::array(ValueType::U8, {Value(uint8_t{1})}),
                                Value::array(ValueType::STRING, {Value("x"), Value("y")})}));
  w.add_tensor("f32", GgmlType::F32, {4, 3}, random_bytes(48, 1));
  w.add_tensor("f16", GgmlType::F16, {5}, random_bytes(10, 2));
  w.add_tensor("q4_0", GgmlType::Q4_0, {64, 2}, random_bytes(4 * 18, 3));
  w.add_tensor("q4_K", GgmlType::Q4_K, {256}, random_bytes(144, 4));
  w.add_tensor("lazy", GgmlType::I32, {3, 1, 1, 2}, [](uint8_t* dst, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) dst[i] = uint8_t(i * 7);
  });
  return w;
}

}  // namespace

TEST_CASE("writer output reads back equal", "[gguf][roundtrip]") {
  GgufWriter w = sample_writer();
  std::vector<uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::parse(bytes);
  CHECK(f.version() == 3);
  CHECK(f.alignment() == 64);
  REQUIRE(f.metadata().size() == w.metadata().size());
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    INFO("key " << w.metadata()[i].key);
    CHECK(f.metadata()[i].key == w.metadata()[i].key);
    CHECK(f.metadata()[i].value == w.metadata()[i].value);
  }
  REQUIRE(f.tensors().size() == 5);
  auto* q4 = f.find_tensor("q4_0");
  REQUIRE(q4);
  CHECK(q4->type == GgmlType::Q4_0);
  CHECK(q4->dims == std::vector<uint64_t>{64, 2});
  CHECK(q4->n_bytes == 72);
  auto expected = random_bytes(72, 3);
  CHECK(std::equal(expected.begin(), expected.end(), q4->data));
  auto* lazy = f.find_tensor("lazy");
  REQUIRE(lazy);
  CHECK(lazy->dims == std::vector<uint64_t>{3, 1, 1, 2});
  for (uint64_t i = 0; i < lazy->n_bytes; ++i) CHECK(lazy->data[i] == uint8_t(i * 7));
  for (const auto& t : f.tensors()) CHECK(t.offset % 64 == 0);
  CHECK(f.get_string("string") == "héllo\nworld");
  CHECK(f.get_int("u64") == std::nullopt);  // above INT64_MAX
  CHECK(f.get_int("i16") == -30000);
  CHECK(f.get_float("f32") == 3.25);
}

TEST_CASE("file and memory output are identical, and open() maps the file", "[gguf][roundtrip]") {
  GgufWriter w = sample_writer();
  auto path = vtc::test::unique_temp_path("roundtrip_test.gguf");
  w.write(path);
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> from_file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(from_file == w.to_bytes());
  GgufFile f = GgufFile::open(path);
  CHECK(f.file_size() == from_file.size());
  CHECK(f.tensors().size() == 5);
  CHECK(f.find("nested")->as_array()->items.size() == 2);
  std::filesystem::remove(path);
}

TEST_CASE("setting a key twice replaces it", "[gguf][roundtrip]") {
  GgufWriter w;
  w.set("k", Value(uint32_t{1}));
  w.set("k", Value(std::string("two")));
  auto bytes = w.to_bytes();
  auto f = GgufFile::parse(bytes);
  REQUIRE(f.metadata().size() == 1);
  CHECK(f.get_string("k") == "two");
}

TEST_CASE("writer rejects inconsistent tensors", "[gguf][roundtrip]") {
  GgufWriter w;
  CHECK_THROWS_AS(w.add_tensor("short", GgmlType::F32, {4}, std::vector<uint8_t>(15)), vtc::Error);
  CHECK_THROWS_AS(w.add_tensor("partial_block", GgmlType::Q8_0, {16}, std::vector<uint8_t>(34)), vtc::Error);
  CHECK_THROWS_AS(w.add_tensor("five_dims", GgmlType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)), vtc::Error);
  CHECK_THROWS_AS(w.set_alignment(48), vtc::Error);
  CHECK_THROWS_AS(GgufFile::open("/nonexistent/file.gguf"), vtc::Error);
}
