// FNV-1a 64: a tiny, stable, non-cryptographic hash. Used where a value must
// be reproducible across runs and machines: kernel names and the kernel
// cache key (codegen/cuda), the artifact's GGUF header checksum, per-tensor
// generator seeds. Not for security or hash tables under attack.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace vtc {

inline constexpr uint64_t kFnv1aBasis = 0xcbf29ce484222325ull;

// `seed` chains hashes: fnv1a64(b, fnv1a64(a)) hashes a then b.
inline uint64_t fnv1a64(std::span<const uint8_t> bytes, uint64_t seed = kFnv1aBasis) {
  uint64_t h = seed;
  for (uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

inline uint64_t fnv1a64(std::string_view s, uint64_t seed = kFnv1aBasis) {
  return fnv1a64(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()), seed);
}

}  // namespace vtc
