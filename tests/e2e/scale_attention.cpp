// Attention amplification of a GGUF file (see scale_attention.h).
#include "tests/e2e/scale_attention.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string_view>

#include "frontends/gguf/dequant.h"
#include "frontends/gguf/gguf.h"
#include "support/error.h"

namespace vtc::test {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "blk.3.attn_q.weight" -> "attn_q"; "" for names not of that form.
std::string block_base(const std::string& name) {
  constexpr std::string_view kWeight = ".weight";
  if (name.rfind("blk.", 0) != 0 || !ends_with(name, std::string(kWeight))) return "";
  const size_t layer_end = name.find('.', 4);
  return name.substr(layer_end + 1, name.size() - layer_end - 1 - kWeight.size());
}

// The byte offsets of the f16 scales (and mins) in one block, ggml-common.h's
// layouts: scaling them all by g scales every dequantized value by g, since
// each value is d * q, d * q + m, or d * sc * q - dmin * m.
const std::vector<uint32_t>* f16_scale_offsets(GgmlType type) {
  static const std::vector<uint32_t> d{0}, d_m{0, 2}, q2_k{80, 82}, q3_k{108}, q6_k{208};
  switch (type) {
    case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0:
    case GgmlType::IQ4_NL: case GgmlType::IQ4_XS: return &d;
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K: return &d_m;
    case GgmlType::Q2_K: return &q2_k;
    case GgmlType::Q3_K: return &q3_k;
    case GgmlType::Q6_K: return &q6_k;
    default: return nullptr;
  }
}

uint16_t scaled_half(uint16_t h, float gain, const std::string& name) {
  const float v = fp16_to_fp32(h) * gain;
  const uint16_t out = fp32_to_fp16(v);
  if (std::isfinite(fp16_to_fp32(h)) && !std::isfinite(fp16_to_fp32(out)))
    throw Error(fmt::format("scale-attn {}: a block scale overflows f16 when scaled by {}", name, gain));
  return out;
}

void scale_floats(GgmlType type, uint8_t* data, uint64_t n, float gain, const std::string& name) {
  for (uint64_t i = 0; i < n; ++i) {
    if (type == GgmlType::F32) {
      float v;
      std::memcpy(&v, data + 4 * i, 4);
      v *= gain;
      std::memcpy(data + 4 * i, &v, 4);
      continue;
    }
    uint16_t h;
    std::memcpy(&h, data + 2 * i, 2);
    h = type == GgmlType::F16 ? scaled_half(h, gain, name) : fp32_to_bf16(bf16_to_fp32(h) * gain);
    std::memcpy(data + 2 * i, &h, 2);
  }
}

// log2(gain) for a power of two, else throws.
int power_of_two(float gain, GgmlType type, const std::string& name) {
  int exp = 0;
  if (!(gain > 0) || std::frexp(gain, &exp) != 0.5f)
    throw Error(fmt::format("scale-attn {}: a {} tensor scales exactly only by a power of two, not {}", name,
                            ggml_type_name(type), gain));
  return exp - 1;
}

}  // namespace

AttentionPart attention_part(const std::string& name) {
  static const std::set<std::string> qk = {"attn_q",      "attn_k",      "attn_q_b", "attn_k_b",
                                         "attn_q_norm", "attn_k_norm", "attn_kv_a_mqa"};
  static const std::set<std::string> vo = {"attn_v", "attn_v_b", "attn_output"};
  const std::string base = block_base(name);
  if (qk.count(base)) return AttentionPart::kQK;
  if (vo.count(base)) return AttentionPart::kVO;
  if (base == "attn_qkv") return AttentionPart::kQKV;
  return AttentionPart::kNone;
}

void scale_values(GgmlType type, uint8_t* data, uint64_t n, float gain, const std::string& name) {
  if (type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16) return scale_floats(type, data, n, gain, name);
  const GgmlTypeTraits& t = ggml_traits(type);
  const std::vector<uint32_t>* offsets = f16_scale_offsets(type);
  if (!offsets && type != GgmlType::MXFP4)
    throw Error(fmt::format("scale-attn {}: type {} is not supported (float types, and the block types with f16 or "
                            "e8m0 block scales)", name, t.name));
  const int shift = power_of_two(gain, type, name);
  for (uint8_t* block = data; block < data + (n / t.block_size) * t.block_bytes; block += t.block_bytes) {
    if (type == GgmlType::MXFP4) {  // e8m0: the value 2^(e - 127)
      const int e = block[0] + shift;
      if (e < 0 || e > 254) throw Error(fmt::format("scale-attn {}: an MXFP4 block exponent leaves e8m0's range", name));
      block[0] = uint8_t(e);
      continue;
    }
    for (uint32_t off : *offsets) {
      uint16_t h;
      std::memcpy(&h, block + off, 2);
      h = scaled_half(h, gain, name);
      std::memcpy(block + off, &h, 2);
    }
  }
}

namespace {

// Rows of a fused attn_qkv, from the file's hparams: q rows, then k, then v.
struct QkvSplit {
  uint64_t q = 0, k = 0;
};

int64_t layer_int(const gguf::GgufFile& f, const std::string& key, int64_t layer, int64_t fallback) {
  const gguf::Value* v = f.find(key);
  if (!v) return fallback;
  if (const gguf::ValueArray* a = v->as_array()) {
    if (size_t(layer) >= a->items.size()) throw Error(fmt::format("scale-attn: {} has no entry for layer {}", key, layer));
    return a->items[size_t(layer)].as_int().value_or(fallback);
  }
  return v->as_int().value_or(fallback);
}

QkvSplit qkv_split(const gguf::GgufFile& f, const gguf::TensorInfo& t, int64_t layer) {
  const std::string a = f.architecture();
  const int64_t n_head = layer_int(f, a + ".attention.head_count", layer, 0);
  const int64_t n_kv = layer_int(f, a + ".attention.head_count_kv", layer, n_head);
  const int64_t n_embd = f.get_int(a + ".embedding_length").value_or(0);
  const int64_t dk = f.get_int(a + ".attention.key_length").value_or(n_head > 0 ? n_embd / n_head : 0);
  const int64_t dv = f.get_int(a + ".attention.value_length").value_or(dk);
  const uint64_t rows = t.dims[1];
  const QkvSplit s{uint64_t(n_head * dk), uint64_t(n_kv * dk)};
  if (n_head <= 0 || s.q + s.k + uint64_t(n_kv * dv) != rows)
    throw Error(fmt::format("scale-attn {}: {} outputs do not split into q/k/v of {} + {} + {} heads x {}/{}", t.name,
                            rows, n_head, n_kv, n_kv, dk, dv));
  return s;
}

// Scales the rows of a fused attn_qkv: its q and k rows by gains.qk, its v
// rows by gains.vo.
void scale_qkv(const gguf::GgufFile& f, const gguf::TensorInfo& t, int64_t layer, uint8_t* data,
               const AttentionGains& g) {
  if (t.dims.size() != 2) throw Error(fmt::format("scale-attn {}: a fused qkv matrix must be 2-D", t.name));
  const QkvSplit s = qkv_split(f, t, layer);
  const uint64_t row_elems = t.dims[0], row_bytes = *ggml_bytes_for(t.type, row_elems);
  scale_values(t.type, data, (s.q + s.k) * row_elems, g.qk, t.name);
  scale_values(t.type, data + (s.q + s.k) * row_bytes, (t.dims[1] - s.q - s.k) * row_elems, g.vo, t.name);
}

int64_t layer_of(const std::string& name) { return std::stoll(name.substr(4, name.find('.', 4) - 4)); }

}  // namespace

std::vector<std::string> scale_attention(const std::string& in, const std::string& out, const AttentionGains& gains) {
  const gguf::GgufFile file = gguf::GgufFile::open(in);
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  if (file.alignment() != gguf::kDefaultAlignment) writer.set_alignment(uint32_t(file.alignment()));
  std::set<int64_t> delta_net_layers;  // blocks with ssm_* tensors
  for (const gguf::TensorInfo& t : file.tensors())
    if (t.name.rfind("blk.", 0) == 0 && t.name.find(".ssm_") != std::string::npos) delta_net_layers.insert(layer_of(t.name));
  std::vector<std::string> scaled;
  for (const gguf::TensorInfo& t : file.tensors()) {
    std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
    const AttentionPart part = attention_part(t.name);
    bool scale = part == AttentionPart::kQK || part == AttentionPart::kVO;
    if (scale)
      scale_values(t.type, bytes.data(), t.n_elements, part == AttentionPart::kQK ? gains.qk : gains.vo, t.name);
    else if (part == AttentionPart::kQKV && !delta_net_layers.count(layer_of(t.name)))
      scale_qkv(file, t, layer_of(t.name), bytes.data(), gains), scale = true;
    if (scale) scaled.push_back(t.name);
    writer.add_tensor(t.name, t.type, t.dims, std::move(bytes));
  }
  writer.write(out);
  return scaled;
}

}  // namespace vtc::test
