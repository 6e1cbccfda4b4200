// GGUF writer (version 3).
//
// Layout: header, key/values in insertion order, tensor infos, padding to
// the alignment, then each tensor's data at an aligned offset in the order
// the tensors were added. The same emit() walks a memory sink (to_bytes) or a
// buffered file sink (write), so both produce identical bytes. Tensors with
// a fill callback are produced one at a time while streaming to disk.
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "frontends/gguf/gguf.h"
#include "support/error.h"

namespace vtc::gguf {
namespace {

struct MemorySink {
  std::vector<uint8_t>& out;
  void put(const void* data, size_t n) {
    auto* p = static_cast<const uint8_t*>(data);
    out.insert(out.end(), p, p + n);
  }
  uint64_t position() const { return out.size(); }
};

struct FileSink {
  std::FILE* file;
  std::string path;
  uint64_t written = 0;
  void put(const void* data, size_t n) {
    if (n && std::fwrite(data, 1, n, file) != n)
      throw Error(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
    written += n;
  }
  uint64_t position() const { return written; }
};

template <typename Sink, typename T>
void put_scalar(Sink& sink, T value) {
  sink.put(&value, sizeof(T));
}

template <typename Sink>
void put_string(Sink& sink, const std::string& s) {
  put_scalar<Sink, uint64_t>(sink, s.size());
  sink.put(s.data(), s.size());
}

template <typename Sink>
void put_value(Sink& sink, const Value& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          put_string(sink, v);
        } else if constexpr (std::is_same_v<T, ValueArray>) {
          put_scalar<Sink, uint32_t>(sink, static_cast<uint32_t>(v.elem_type));
          put_scalar<Sink, uint64_t>(sink, v.items.size());
          for (const auto& item : v.items) {
            if (item.type() != v.elem_type)
              throw Error(fmt::format("GGUF writer: array of {} holds a {} item",
                                      value_type_name(v.elem_type), value_type_name(item.type())));
            put_value(sink, item);
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          put_scalar<Sink, uint8_t>(sink, v ? 1 : 0);
        } else {
          put_scalar<Sink, T>(sink, v);
        }
      },
      value.storage());
}

template <typename Sink>
void pad_to(Sink& sink, uint64_t alignment) {
  static const uint8_t zeros[256] = {};
  uint64_t pad = (alignment - sink.position() % alignment) % alignment;
  while (pad > 0) {
    uint64_t n = std::min<uint64_t>(pad, sizeof(zeros));
    sink.put(zeros, n);
    pad -= n;
  }
}

}  // namespace

void GgufWriter::set(std::string key, Value value) {
  for (auto& kv : metadata_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  metadata_.push_back({std::move(key), std::move(value)});
}

void GgufWriter::set_alignment(uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw Error(fmt::format("GGUF writer: alignment {} is not a power of two", alignment));
  alignment_ = alignment;
  set("general.alignment", Value(alignment));
}

namespace {
TensorInfo make_info(std::string name, GgmlType type, std::vector<uint64_t> dims) {
  if (dims.empty() || dims.size() > kMaxDims)
    throw Error(fmt::format("GGUF writer: tensor '{}' has {} dims (1..{} allowed)", name,
                            dims.size(), kMaxDims));
  TensorInfo info;
  info.n_elements = 1;
  for (uint64_t d : dims) info.n_elements *= d;
  auto bytes = ggml_bytes_for(type, info.n_elements);
  if (!bytes || dims[0] % ggml_traits(type).block_size != 0)
    throw Error(fmt::format("GGUF writer: tensor '{}': dims[0]={} is not a multiple of the {} "
                            "block size",
                            name, dims[0], ggml_type_name(type)));
  info.n_bytes = *bytes;
  info.name = std::move(name);
  info.type = type;
  info.dims = std::move(dims);
  return info;
}
}  // namespace

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<uint64_t> dims,
                            std::vector<uint8_t> data) {
  TensorInfo info = make_info(std::move(name), type, std::move(dims));
  if (data.size() != info.n_bytes)
    throw Error(fmt::format("GGUF writer: tensor '{}' needs {} bytes, got {}", info.name,
                            info.n_bytes, data.size()));
  tensors_.push_back({std::move(info), std::move(data), nullptr});
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<uint64_t> dims,
                            FillFn fill) {
  tensors_.push_back({make_info(std::move(name), type, std::move(dims)), {}, std::move(fill)});
}

void GgufWriter::finalize_layout(std::vector<uint64_t>& offsets, uint64_t& data_bytes) const {
  offsets.clear();
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    offsets.push_back(offset);
    offset += (t.info.n_bytes + alignment_ - 1) / alignment_ * alignment_;
  }
  data_bytes = offset;
}

template <typename Sink>
void GgufWriter::emit(Sink& sink) const {
  std::vector<uint64_t> offsets;
  uint64_t data_bytes = 0;
  finalize_layout(offsets, data_bytes);

  put_scalar<Sink, uint32_t>(sink, kMagic);
  put_scalar<Sink, uint32_t>(sink, 3);
  put_scalar<Sink, uint64_t>(sink, tensors_.size());
  put_scalar<Sink, uint64_t>(sink, metadata_.size());
  for (const auto& kv : metadata_) {
    put_string(sink, kv.key);
    put_scalar<Sink, uint32_t>(sink, static_cast<uint32_t>(kv.value.type()));
    put_value(sink, kv.value);
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorInfo& info = tensors_[i].info;
    put_string(sink, info.name);
    put_scalar<Sink, uint32_t>(sink, static_cast<uint32_t>(info.dims.size()));
    for (uint64_t d : info.dims) put_scalar<Sink, uint64_t>(sink, d);
    put_scalar<Sink, uint32_t>(sink, static_cast<uint32_t>(info.type));
    put_scalar<Sink, uint64_t>(sink, offsets[i]);
  }
  pad_to(sink, alignment_);
  std::vector<uint8_t> scratch;
  for (const auto& t : tensors_) {
    if (t.fill) {
      scratch.assign(t.info.n_bytes, 0);
      t.fill(scratch.data(), scratch.size());
      sink.put(scratch.data(), scratch.size());
    } else {
      sink.put(t.data.data(), t.data.size());
    }
    pad_to(sink, alignment_);
  }
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  MemorySink sink{out};
  emit(sink);
  return out;
}

void GgufWriter::write(const std::string& path) const {
  // Write to a temporary name and rename, so a crash never leaves a
  // half-written file under the final name.
  std::string tmp = path + ".tmp";
  std::vector<char> buffer(1 << 20);  // outlives the FILE that uses it
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw Error(fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> guard(f, std::fclose);
  std::setvbuf(f, buffer.data(), _IOFBF, buffer.size());
  FileSink sink{f, tmp};
  emit(sink);
  if (std::fclose(guard.release()) != 0)
    throw Error(fmt::format("{}: close failed: {}", tmp, std::strerror(errno)));
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error(fmt::format("{}: rename failed: {}", path, std::strerror(errno)));
}

}  // namespace vtc::gguf
