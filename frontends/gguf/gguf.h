// GGUF files: an in-memory model of metadata and tensor infos, a validating
// reader over an mmapped file (or any byte buffer), and a writer.
//
// Reader algorithm: a bounds-checked cursor walks header -> key/values ->
// tensor infos, rejecting any count or length that cannot fit in the bytes
// that remain, so a hostile file can never make us allocate or read past its
// end. Then tensor data offsets are checked against the data section: each
// must be aligned, in bounds, and disjoint from every other tensor (checked
// by sorting on offset). Every error names the field and its byte offset.
// See docs/gguf.md for the format subset and the error list.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "support/ggml_type.h"
#include "support/weight_layout.h"

namespace vtc::gguf {

// On-disk metadata value types. The numeric values are the GGUF format's.
enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view value_type_name(ValueType type);

class Value;
struct ValueArray {
  ValueType elem_type = ValueType::U8;
  std::vector<Value> items;
  bool operator==(const ValueArray&) const;
};

// One metadata value. The variant index equals the ValueType number.
class Value {
 public:
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float,
                               bool, std::string, ValueArray, uint64_t, int64_t, double>;
  Value() = default;
  template <typename T>
  Value(T v) : storage_(std::move(v)) {}  // NOLINT: implicit on purpose
  Value(const char* s) : storage_(std::string(s)) {}

  static Value array(ValueType elem_type, std::vector<Value> items);
  static Value string_array(const std::vector<std::string>& items);

  ValueType type() const { return static_cast<ValueType>(storage_.index()); }
  const Storage& storage() const { return storage_; }

  // Any integer type (and bool) widened; nullopt for other types or
  // unsigned values above INT64_MAX.
  std::optional<int64_t> as_int() const;
  // A 64-bit pattern: u64 as stored, other integers sign-extended (hash
  // multipliers are u64 and may exceed INT64_MAX); nullopt for non-integers.
  std::optional<uint64_t> as_bits64() const;
  // F32/F64, and integers converted.
  std::optional<double> as_float() const;
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const ValueArray* as_array() const;

  // Short human-readable rendering; arrays show their first `max_items`.
  std::string to_display(size_t max_items = 8) const;

  bool operator==(const Value& other) const { return storage_ == other.storage_; }

 private:
  Storage storage_ = uint8_t{0};
};

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the contiguous one
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;         // relative to the start of the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapped file; null for writer-side infos
  // How the bytes at `data` are arranged (support/weight_layout.h). Rows,
  // as in every GGUF, unless the bytes were rearranged by `vtc compile
  // --pack`; only an artifact's embedded GGUF sets it (from its manifest's
  // gguf.stored_layouts), through GgufFile::set_stored_layout.
  WeightLayout stored_layout = WeightLayout::Rows;
};

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;

// A parsed, validated GGUF file. Tensor data pointers stay valid while the
// GgufFile lives; the file is mmapped, not read.
class GgufFile {
 public:
  // Maps and validates `path`. Throws vtc::Error naming the problem.
  static GgufFile open(const std::string& path);
  // Maps `path` and validates the GGUF stored at [offset, offset + size) of
  // it (a model packed into a .vtc artifact). `offset` keeps the file's
  // tensor alignment when it is a multiple of 4096.
  static GgufFile open(const std::string& path, uint64_t offset, uint64_t size);
  // Validates a byte buffer the caller keeps alive (fuzzing, tests).
  static GgufFile parse(std::span<const uint8_t> bytes, std::string display_name = "<memory>");

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return bytes_.size(); }
  std::span<const uint8_t> bytes() const { return bytes_; }

  const std::vector<KeyValue>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  // general.architecture, or "" if absent.
  std::string architecture() const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // Records that tensor `name`'s bytes are stored in `layout` (a packed
  // artifact's GGUF). Returns false if there is no such tensor. The caller
  // checks that the tensor's type supports the layout.
  bool set_stored_layout(std::string_view name, WeightLayout layout);

 private:
  GgufFile() = default;
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;
  std::string path_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> metadata_;
  std::vector<TensorInfo> tensors_;
  friend class Reader;
};

// Builds a GGUF (version 3) file. Keys keep insertion order; setting a key
// again replaces its value. Tensor data is either given up front or produced
// by a callback at write time, so multi-GB models stream to disk.
class GgufWriter {
 public:
  using FillFn = std::function<void(uint8_t* dst, uint64_t n_bytes)>;

  void set(std::string key, Value value);
  void set_alignment(uint32_t alignment);  // also writes general.alignment
  void add_tensor(std::string name, GgmlType type, std::vector<uint64_t> dims,
                  std::vector<uint8_t> data);
  void add_tensor(std::string name, GgmlType type, std::vector<uint64_t> dims, FillFn fill);

  // Throws vtc::Error on I/O failure or inconsistent tensors.
  void write(const std::string& path) const;
  std::vector<uint8_t> to_bytes() const;

  const std::vector<KeyValue>& metadata() const { return metadata_; }

 private:
  struct PendingTensor {
    TensorInfo info;
    std::vector<uint8_t> data;
    FillFn fill;
  };
  void finalize_layout(std::vector<uint64_t>& offsets, uint64_t& data_bytes) const;
  template <typename Sink>
  void emit(Sink& sink) const;

  uint64_t alignment_ = kDefaultAlignment;
  std::vector<KeyValue> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace vtc::gguf
