// GGUF reader: mmap plus a validating, bounds-checked parse.
//
// Algorithm:
//   1. Header: magic, version (2 or 3; a byte-swapped version means a
//      big-endian file, rejected by name), tensor and key/value counts.
//      Each count is checked against the bytes left before anything is
//      allocated: every key/value needs at least 13 bytes and every tensor
//      info at least 24, so a count that cannot fit is rejected up front.
//   2. Key/values, recursively for arrays (depth-limited), with the same
//      "can it fit" check on every string length and array count.
//   3. general.alignment (a u32 power of two) if present, else 32.
//   4. Tensor infos: name, dims (at most 4, product must not overflow
//      int64), type (must be known, dims[0] a whole number of blocks),
//      offset.
//   5. Data section at the aligned end of the infos. Each tensor is checked
//      for alignment and bounds, then all are sorted by offset and adjacent
//      pairs checked for overlap.
// Errors read "<file>: <field> at byte <offset>: <problem>".
//
// A mapped file that shrinks under the process (a `cp` over it truncates
// first) turns the next read of a lost page into SIGBUS. open() installs a
// SIGBUS handler that looks the faulting address up in the table of live
// mappings: inside one, it prints "vtc: error: <file> changed while mapped
// ..." and exits with status 1; elsewhere it hands the signal on to the
// previous handler (or the default action), so other faults are untouched.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <mutex>
#include <numeric>
#include <unordered_set>

#include "frontends/gguf/gguf.h"
#include "support/error.h"

namespace vtc::gguf {

namespace {

// Live mappings, read by the SIGBUS handler without locks: a slot is
// published by storing `begin` last and retired by clearing it first.
struct MappedRange {
  std::atomic<uintptr_t> begin{0};
  std::atomic<size_t> size{0};
  char path[1024] = {};
  size_t path_len = 0;
};
constexpr size_t kMaxMapped = 64;
MappedRange g_mapped[kMaxMapped];
std::mutex g_mapped_mutex;
struct sigaction g_previous_sigbus {};

void write_stderr(const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= size_t(w);
  }
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<uintptr_t>(info ? info->si_addr : nullptr);
  for (const MappedRange& m : g_mapped) {
    const uintptr_t begin = m.begin.load(std::memory_order_acquire);
    if (begin == 0 || addr < begin || addr - begin >= m.size.load(std::memory_order_relaxed)) continue;
    static const char kHead[] = "vtc: error: ";
    static const char kTail[] =
        " changed while mapped (truncated or rewritten in place); restart vtc. Replace a model file by writing the new "
        "one beside it and renaming it over the old (mv), never by copying over it\n";
    write_stderr(kHead, sizeof kHead - 1);
    write_stderr(m.path, m.path_len);
    write_stderr(kTail, sizeof kTail - 1);
    ::_exit(1);
  }
  // Not a mapped model file: what would have happened without us.
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) && g_previous_sigbus.sa_sigaction) {
    g_previous_sigbus.sa_sigaction(sig, info, context);
  } else if (g_previous_sigbus.sa_handler != SIG_DFL && g_previous_sigbus.sa_handler != SIG_IGN &&
             g_previous_sigbus.sa_handler != nullptr) {
    g_previous_sigbus.sa_handler(sig);
  } else {
    ::signal(SIGBUS, SIG_DFL);
    ::raise(SIGBUS);  // a fault re-executes the access after return; a raised SIGBUS needs this
  }
}

// (Re)installs the handler: checked on every open, since a test harness
// may have restored its own handler in between.
void install_sigbus_handler_locked() {
  struct sigaction current {};
  if (::sigaction(SIGBUS, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_sigbus) return;
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  if (::sigaction(SIGBUS, &action, &current) == 0) g_previous_sigbus = current;
}

MappedRange* register_mapping(const void* addr, size_t size, const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mapped_mutex);
  install_sigbus_handler_locked();
  for (MappedRange& m : g_mapped) {
    if (m.begin.load(std::memory_order_relaxed) != 0) continue;
    m.path_len = std::min(path.size(), sizeof m.path - 1);
    std::memcpy(m.path, path.data(), m.path_len);
    m.size.store(size, std::memory_order_relaxed);
    m.begin.store(reinterpret_cast<uintptr_t>(addr), std::memory_order_release);
    return &m;
  }
  return nullptr;  // table full: such a file is unprotected
}

void unregister_mapping(MappedRange* m) {
  if (!m) return;
  std::lock_guard<std::mutex> lock(g_mapped_mutex);
  m->begin.store(0, std::memory_order_release);
}

}  // namespace

struct GgufFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  MappedRange* range = nullptr;
  ~Mapping() {
    unregister_mapping(range);
    if (addr) munmap(addr, size);
  }
};

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

namespace {
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;   // empty key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // empty name, n_dims, type, offset
constexpr int kMaxArrayDepth = 16;

uint64_t min_value_bytes(ValueType type) {
  switch (type) {
    case ValueType::U8: case ValueType::I8: case ValueType::BOOL: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::STRING: return 8;
    case ValueType::ARRAY: return 4 + 8;
  }
  return 1;
}

bool is_known_value_type(uint32_t raw) { return raw <= static_cast<uint32_t>(ValueType::F64); }
}  // namespace

// The parse state; a friend of GgufFile so it can fill it directly.
class Reader {
 public:
  Reader(GgufFile& file, std::span<const uint8_t> bytes, std::string name)
      : file_(file), bytes_(bytes), name_(std::move(name)) {}

  void parse() {
    read_header();
    read_metadata();
    read_alignment();
    read_tensor_infos();
    place_data_section();
  }

 private:
  [[noreturn]] void fail(uint64_t at, std::string_view field, const std::string& problem) const {
    throw Error(fmt::format("{}: {} at byte {}: {}", name_, field, at, problem));
  }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  void need(uint64_t n, std::string_view field) const {
    if (n > remaining())
      fail(pos_, field,
           fmt::format("file truncated: needs {} bytes, only {} remain (file is {} bytes)", n,
                       remaining(), bytes_.size()));
  }

  template <typename T>
  T read_scalar(std::string_view field) {
    need(sizeof(T), field);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  // A count of items, each at least `min_item_bytes`, that must fit in the file.
  uint64_t read_count(std::string_view field, uint64_t min_item_bytes) {
    uint64_t at = pos_;
    uint64_t count = read_scalar<uint64_t>(field);
    if (min_item_bytes) check_count_fits(at, field, count, min_item_bytes);
    return count;
  }

  void check_count_fits(uint64_t at, std::string_view field, uint64_t count, uint64_t min_item_bytes) const {
    if (count > remaining() / min_item_bytes)
      fail(at, field,
           fmt::format("count {} cannot fit: {} items of at least {} bytes need more than the {} "
                       "bytes left (file truncated, or the count is corrupt)",
                       count, count, min_item_bytes, remaining()));
  }

  std::string read_string(std::string_view field) {
    uint64_t at = pos_;
    uint64_t len = read_scalar<uint64_t>(field);
    if (len > remaining())
      fail(at, field,
           fmt::format("string length {} exceeds the {} bytes left in the file (file truncated, "
                       "or the length is corrupt)",
                       len, remaining()));
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return s;
  }

  void read_header() {
    need(4, "magic");
    uint32_t magic = read_scalar<uint32_t>("magic");
    if (magic != kMagic) {
      std::string shown;
      for (int i = 0; i < 4; ++i) {
        char c = static_cast<char>((magic >> (8 * i)) & 0xff);
        shown += std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c)
                                                             : fmt::format("\\x{:02x}", uint8_t(c));
      }
      fail(0, "magic", fmt::format("not a GGUF file: expected \"GGUF\", found \"{}\"", shown));
    }
    uint32_t version = read_scalar<uint32_t>("version");
    if (version != 2 && version != 3) {
      if (__builtin_bswap32(version) == 2 || __builtin_bswap32(version) == 3)
        fail(4, "version",
             fmt::format("big-endian GGUF (version {} byte-swapped); only little-endian files are "
                         "supported",
                         __builtin_bswap32(version)));
      fail(4, "version", fmt::format("unsupported GGUF version {} (supported: 2, 3)", version));
    }
    file_.version_ = version;
    // Both counts are read before either is checked, so the check sees the
    // bytes that really follow the header.
    tensor_count_ = read_count("tensor_count", 0);
    kv_count_ = read_count("metadata_kv_count", 0);
    check_count_fits(8, "tensor_count", tensor_count_, kMinTensorInfoBytes);
    check_count_fits(16, "metadata_kv_count", kv_count_, kMinKeyValueBytes);
  }

  Value read_value(ValueType type, const std::string& field, int depth) {
    switch (type) {
      case ValueType::U8: return read_scalar<uint8_t>(field);
      case ValueType::I8: return read_scalar<int8_t>(field);
      case ValueType::U16: return read_scalar<uint16_t>(field);
      case ValueType::I16: return read_scalar<int16_t>(field);
      case ValueType::U32: return read_scalar<uint32_t>(field);
      case ValueType::I32: return read_scalar<int32_t>(field);
      case ValueType::F32: return read_scalar<float>(field);
      case ValueType::U64: return read_scalar<uint64_t>(field);
      case ValueType::I64: return read_scalar<int64_t>(field);
      case ValueType::F64: return read_scalar<double>(field);
      case ValueType::BOOL: {
        uint64_t at = pos_;
        uint8_t b = read_scalar<uint8_t>(field);
        if (b > 1) fail(at, field, fmt::format("bool value {} is not 0 or 1", b));
        return b == 1;
      }
      case ValueType::STRING: return read_string(field);
      case ValueType::ARRAY: return read_array(field, depth);
    }
    fail(pos_, field, "unknown value type");
  }

  Value read_array(const std::string& field, int depth) {
    if (depth >= kMaxArrayDepth)
      fail(pos_, field, fmt::format("arrays nested deeper than {} levels", kMaxArrayDepth));
    uint64_t type_at = pos_;
    uint32_t raw_type = read_scalar<uint32_t>(field + " (array element type)");
    if (!is_known_value_type(raw_type))
      fail(type_at, field, fmt::format("unknown array element type {}", raw_type));
    auto elem_type = static_cast<ValueType>(raw_type);
    uint64_t count = read_count(field + " (array length)", min_value_bytes(elem_type));
    std::vector<Value> items;
    items.reserve(count);
    for (uint64_t i = 0; i < count; ++i) items.push_back(read_value(elem_type, field, depth + 1));
    return Value::array(elem_type, std::move(items));
  }

  void read_metadata() {
    std::unordered_set<std::string> seen;
    file_.metadata_.reserve(kv_count_);
    for (uint64_t i = 0; i < kv_count_; ++i) {
      uint64_t key_at = pos_;
      std::string key = read_string(fmt::format("metadata key #{}", i));
      if (!seen.insert(key).second) fail(key_at, "metadata key", fmt::format("duplicate key '{}'", key));
      uint64_t type_at = pos_;
      uint32_t raw_type = read_scalar<uint32_t>(key + " (value type)");
      if (!is_known_value_type(raw_type))
        fail(type_at, key, fmt::format("unknown metadata value type {}", raw_type));
      Value value = read_value(static_cast<ValueType>(raw_type), key, 0);
      file_.metadata_.push_back({std::move(key), std::move(value)});
    }
  }

  void read_alignment() {
    const Value* v = file_.find("general.alignment");
    if (!v) return;
    auto* a = std::get_if<uint32_t>(&v->storage());
    if (!a)
      fail(0, "general.alignment",
           fmt::format("must be a u32, found {}", value_type_name(v->type())));
    if (*a == 0 || (*a & (*a - 1)) != 0)
      fail(0, "general.alignment", fmt::format("{} is not a power of two", *a));
    file_.alignment_ = *a;
  }

  void read_tensor_info(uint64_t index, std::unordered_set<std::string>& names) {
    uint64_t name_at = pos_;
    TensorInfo t;
    t.name = read_string(fmt::format("tensor #{} name", index));
    if (!names.insert(t.name).second)
      fail(name_at, "tensor name", fmt::format("duplicate tensor name '{}'", t.name));
    const std::string field = fmt::format("tensor '{}'", t.name);
    uint64_t dims_at = pos_;
    uint32_t n_dims = read_scalar<uint32_t>(field + " n_dims");
    if (n_dims > kMaxDims)
      fail(dims_at, field, fmt::format("{} dimensions (at most {} are allowed)", n_dims, kMaxDims));
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim_at = pos_;
      uint64_t dim = read_scalar<uint64_t>(field + " dims");
      if (dim > uint64_t(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(elements, dim, &elements) ||
          elements > uint64_t(std::numeric_limits<int64_t>::max()))
        fail(dim_at, field, fmt::format("dimension product overflows int64 at dim {} = {}", d, dim));
      t.dims.push_back(dim);
    }
    uint64_t type_at = pos_;
    uint32_t raw_type = read_scalar<uint32_t>(field + " type");
    const GgmlTypeTraits* traits = find_ggml_type(raw_type);
    if (!traits) fail(type_at, field, fmt::format("unknown tensor type {}", raw_type));
    t.type = traits->type;
    if (!t.dims.empty() && t.dims[0] % traits->block_size != 0)
      fail(dims_at, field,
           fmt::format("dims[0] = {} is not a multiple of the {} block size {}", t.dims[0],
                       traits->name, traits->block_size));
    t.n_elements = elements;
    auto bytes = ggml_bytes_for(t.type, elements);
    if (!bytes) fail(dims_at, field, "byte size overflows uint64");
    t.n_bytes = *bytes;
    offset_positions_.push_back(pos_);
    t.offset = read_scalar<uint64_t>(field + " offset");
    file_.tensors_.push_back(std::move(t));
  }

  void read_tensor_infos() {
    std::unordered_set<std::string> names;
    file_.tensors_.reserve(tensor_count_);
    for (uint64_t i = 0; i < tensor_count_; ++i) read_tensor_info(i, names);
  }

  void place_data_section() {
    // As in ggml: the data section is padded to the alignment only when
    // there are tensors; a tensor-less file (a vocab) ends at its metadata.
    if (file_.tensors_.empty()) {
      file_.data_offset_ = pos_;
      return;
    }
    uint64_t align = file_.alignment_;
    uint64_t data_offset = (pos_ + align - 1) / align * align;
    file_.data_offset_ = data_offset;
    if (data_offset > bytes_.size())
      fail(pos_, "data section",
           fmt::format("file truncated: data section would start at byte {} but the file is {} "
                       "bytes",
                       data_offset, bytes_.size()));
    uint64_t data_size = bytes_.size() - data_offset;
    std::vector<size_t> order(file_.tensors_.size());
    for (size_t i = 0; i < order.size(); ++i) {
      TensorInfo& t = file_.tensors_[i];
      const std::string field = fmt::format("tensor '{}' offset", t.name);
      if (t.offset % align != 0)
        fail(offset_positions_[i], field,
             fmt::format("offset {} is not aligned to {}", t.offset, align));
      if (t.offset > data_size || t.n_bytes > data_size - t.offset)
        fail(offset_positions_[i], field,
             fmt::format("tensor data [{}, +{}) is out of bounds: the data section holds {} bytes "
                         "(file truncated?)",
                         t.offset, t.n_bytes, data_size));
      t.data = bytes_.data() + data_offset + t.offset;
      order[i] = i;
    }
    check_overlaps(order);
  }

  void check_overlaps(std::vector<size_t>& order) {
    const auto& ts = file_.tensors_;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return ts[a].offset < ts[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& prev = ts[order[k - 1]];
      const TensorInfo& next = ts[order[k]];
      if (prev.offset + prev.n_bytes > next.offset && next.n_bytes > 0 && prev.n_bytes > 0)
        fail(offset_positions_[order[k]], fmt::format("tensor '{}' offset", next.name),
             fmt::format("data [{}, +{}) overlaps tensor '{}' at [{}, +{})", next.offset,
                         next.n_bytes, prev.name, prev.offset, prev.n_bytes));
    }
  }

  GgufFile& file_;
  std::span<const uint8_t> bytes_;
  std::string name_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  std::vector<uint64_t> offset_positions_;  // byte position of each tensor's offset field
};

GgufFile GgufFile::parse(std::span<const uint8_t> bytes, std::string display_name) {
  GgufFile file;
  file.path_ = display_name;
  file.bytes_ = bytes;
  Reader(file, bytes, std::move(display_name)).parse();
  return file;
}

GgufFile GgufFile::open(const std::string& path) { return open(path, 0, UINT64_MAX); }

GgufFile GgufFile::open(const std::string& path, uint64_t offset, uint64_t size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: not a regular file", path));
  }
  auto mapping = std::make_unique<Mapping>();
  std::span<const uint8_t> bytes;
  if (st.st_size > 0) {
    void* addr = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw Error(fmt::format("{}: mmap failed: {}", path, std::strerror(err)));
    }
    mapping->addr = addr;
    mapping->size = static_cast<size_t>(st.st_size);
    mapping->range = register_mapping(addr, mapping->size, path);
    bytes = {static_cast<const uint8_t*>(addr), mapping->size};
  }
  ::close(fd);
  if (size == UINT64_MAX) size = bytes.size() - std::min<uint64_t>(offset, bytes.size());
  if (offset > bytes.size() || size > bytes.size() - offset)
    throw Error(fmt::format("{}: embedded GGUF [{}, +{}) runs past the end of the file ({} bytes)", path, offset, size,
                            bytes.size()));
  GgufFile file = parse(bytes.subspan(offset, size), path);
  file.mapping_ = std::move(mapping);
  return file;
}

const Value* GgufFile::find(std::string_view key) const {
  for (const auto& kv : metadata_)
    if (kv.key == key) return &kv.value;
  return nullptr;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (v && v->as_string()) return *v->as_string();
  return std::nullopt;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_int() : std::nullopt;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_float() : std::nullopt;
}

std::string GgufFile::architecture() const {
  return get_string("general.architecture").value_or("");
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

bool GgufFile::set_stored_layout(std::string_view name, WeightLayout layout) {
  for (auto& t : tensors_)
    if (t.name == name) {
      t.stored_layout = layout;
      return true;
    }
  return false;
}

}  // namespace vtc::gguf
