// A byte-level GGUF builder for tests: writes fields one by one, so a test
// can produce any malformed file and know the byte offset of each field.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace vtc::test {

struct RawGguf {
  std::vector<uint8_t> bytes;

  size_t pos() const { return bytes.size(); }
  template <typename T>
  size_t put(T v) {
    size_t at = pos();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
    return at;
  }
  size_t u32(uint32_t v) { return put(v); }
  size_t u64(uint64_t v) { return put(v); }
  size_t str(const std::string& s) {
    size_t at = u64(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return at;
  }
  size_t header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    u32(0x46554747);
    u32(version);
    u64(n_tensors);
    return u64(n_kv);
  }
  // A u32 key/value; returns the offset of the key.
  size_t kv_u32(const std::string& key, uint32_t v) {
    size_t at = str(key);
    u32(4);
    u32(v);
    return at;
  }
  // A tensor info of f32 dims; returns the offset of its name.
  size_t tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                uint64_t offset) {
    size_t at = str(name);
    u32(uint32_t(dims.size()));
    for (auto d : dims) u64(d);
    u32(type);
    u64(offset);
    return at;
  }
  void pad(size_t alignment = 32) {
    while (bytes.size() % alignment) bytes.push_back(0);
  }
  void zeros(size_t n) { bytes.resize(bytes.size() + n, 0); }
};

}  // namespace vtc::test
