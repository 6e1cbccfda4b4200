// qwen4exp, as the reference's src/models/qwen4exp.cpp: the Gated DeltaNet
// hybrid layers of qwen35moe (arch/qwen35.cpp; the DeltaNet output gate is
// sigmoid(z)), wrapped in hyper-connections instead of pre-norms, with a
// PLE n-gram block on one DeltaNet layer and the QSA indexer on attention.
//
// Hyper-connections keep hc residual streams res [n, hc, D], starting as
// hc copies of the token embedding. Before each block (token mixer, FFN):
//   xn    = rms_norm(res) * gain        per stream, gain [hc, D]
//   gate  = sigmoid(silu((xn Wdown) / hc) Wup)          [n, hc*D]
//   mixed = sum over streams of (xn * gate), / hc       block input [n, D]
//   inj   = xn Winject                                   [n, hc]
// and after it res += out * 2 sigmoid(inj / hc) (each stream its weight).
// The head mixes with output_hc_* (no inject, no output_norm).
//
// PLE (before its layer's mixer): e = the token's n-gram rows of
// per_layer_token_embd (ngram_hash over the ids and @ngram_hist, which
// ngram_roll advances; EOS cuts the context), then
//   key = grouped_norm(e Wkey), query = grouped_norm(res)
//   s = sum_D(key * query) / sqrt(D)                     per stream
//   gated = (e Wvalue) * sigmoid(sign(s) sqrt(max(|s|, 1e-6)))
//   res += gated + silu(causal_conv1d(grouped_norm(gated), dilation = n))
// with the conv ring @ple_conv.L.
//
// QSA (attention layers with a compress ratio): indexer_select pools the
// raw keys k_proj(x) of @idx.L into blocks and scores them with the
// per-head queries rope(rms_norm(q_proj(x))); attention then keeps only
// the selected positions (docs/ir.md: indexer_select).
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "frontends/gguf/arch/hybrid.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Builder;
using ir::Dim;
using ir::Value;

struct Qwen4ExpHparams {
  int64_t hc = 0;                        // hyper_connection.count
  std::vector<int64_t> ratios;           // attention.compress_ratios, per layer (0: dense)
  int64_t indexer_heads = 0, indexer_dim = 0, indexer_top_k = 0;
  int64_t ple_layer = -1;                // -1: no PLE block
  int64_t ple_conv_kernel = 0;
  ir::NgramHashOptions ngram;
};


// The u64 arrays of the PLE hash, as 64-bit patterns.
std::vector<int64_t> bits64_array(const gguf::GgufFile& f, const std::string& key, size_t n_min) {
  std::vector<int64_t> out;
  const auto* kv = f.find(key);
  const auto* arr = kv ? kv->as_array() : nullptr;
  if (arr)
    for (const auto& item : arr->items) out.push_back(int64_t(item.as_bits64().value_or(0)));
  if (out.size() < n_min)
    throw Error(fmt::format("{}: {} has {} entries, at least {} are required", f.path(), key, out.size(), n_min));
  return out;
}

void read_ple(const gguf::GgufFile& f, const Hparams& h, const DeltaNetHparams& d, Qwen4ExpHparams& q) {
  const std::string a = h.arch + ".ple.";
  const std::vector<int64_t> layers = int_array(f, a + "layers");
  if (layers.empty()) return;
  if (layers.size() != 1 || layers[0] < 0 || layers[0] >= h.n_layer || !d.recurrent[size_t(layers[0])])
    throw Error(fmt::format("{}: {}layers must name one DeltaNet layer", f.path(), a));
  q.ple_layer = layers[0];
  q.ple_conv_kernel = require_int(f, a + "conv_kernel");
  ir::NgramHashOptions& g = q.ngram;
  g.n = require_int(f, a + "ngram_size");
  g.heads_per_gram = require_int(f, a + "heads_per_ngram");
  g.eos = f.get_int(a + "eos_token_id").value_or(-1);
  if (g.n < 2 || g.n > 16 || g.eos < 0)
    throw Error(fmt::format("{}: {}ngram_size must be in [2, 16] and {}eos_token_id set", f.path(), a, a));
  const size_t heads = size_t((g.n - 1) * g.heads_per_gram);
  g.mult = bits64_array(f, a + "layer_multipliers", size_t(g.n));
  g.offset = bits64_array(f, a + "head_offsets", heads);
  g.vocab = bits64_array(f, a + "head_vocab_sizes", heads);
  g.mult.resize(size_t(g.n)), g.offset.resize(heads), g.vocab.resize(heads);
  // The hash indexes per_layer_token_embd rows: every head range must lie inside it.
  const gguf::TensorInfo* table = f.find_tensor("per_layer_token_embd.weight");
  const int64_t rows = table && table->dims.size() == 2 ? int64_t(table->dims[1]) : 0;
  for (size_t i = 0; i < heads; ++i)
    if (g.vocab[i] <= 0 || g.offset[i] < 0 || g.offset[i] > rows - g.vocab[i])
      throw Error(fmt::format("{}: PLE head {} rows [{}, {} + {}) are outside per_layer_token_embd's {} rows", f.path(), i,
                              g.offset[i], g.offset[i], g.vocab[i], rows));
  const int64_t per_layer = require_int(f, h.arch + ".embedding_length_per_layer_input");
  if (per_layer * int64_t(heads) != h.n_embd)
    throw Error(fmt::format("{}: {} PLE heads of {} must span n_embd {}", f.path(), heads, per_layer, h.n_embd));
}

Qwen4ExpHparams read_qwen4exp_hparams(const gguf::GgufFile& f, const Hparams& h, const DeltaNetHparams& d) {
  const std::string& a = h.arch;
  Qwen4ExpHparams q;
  q.hc = require_int(f, a + ".hyper_connection.count");
  if (q.hc < 2) throw Error(fmt::format("{}: {}.hyper_connection.count must be at least 2", f.path(), a));
  q.ratios = int_array(f, a + ".attention.compress_ratios");
  q.ratios.resize(size_t(h.n_layer), 0);
  for (int64_t r : q.ratios)
    if (r < 0 || r > 64) throw Error(fmt::format("{}: {}.attention.compress_ratios entry {} is outside [0, 64]", f.path(), a, r));
  q.indexer_heads = require_int(f, a + ".attention.indexer.head_count");
  q.indexer_dim = require_int(f, a + ".attention.indexer.key_length");
  q.indexer_top_k = require_int(f, a + ".attention.indexer.top_k");
  if (q.indexer_top_k > h.n_ctx)
    throw Error(fmt::format("{}: {}.attention.indexer.top_k {} exceeds the context length {}", f.path(), a,
                            q.indexer_top_k, h.n_ctx));
  read_ple(f, h, d, q);
  return q;
}

class Qwen4Exp final : public Architecture {
 public:
  Qwen4Exp(const gguf::GgufFile& f, const BuildOptions& o)
      : Architecture(f), d_(read_deltanet_hparams(f, h)), q_(read_qwen4exp_hparams(f, h, d_)), o_(o), layers_(h, d_) {}

  void declare_states(ir::Module& m) const override {
    layers_.declare_states(m, o_);
    const Dim P = Dim::symbol("P"), S = Dim::symbol("S");
    for (int64_t l = 0; l < h.n_layer; ++l)
      if (uses_indexer(l))
        m.add_state(fmt::format("idx.{}", l), ir::StateKind::Paged,
                    {ir::ElemType::F16, {1, P, o_.kv_page_tokens, q_.indexer_dim}, ir::Placement::Device});
    if (q_.ple_layer < 0) return;
    m.add_state(fmt::format("ple_conv.{}", q_.ple_layer), ir::StateKind::Plain,
                {ir::ElemType::F32, {S, (q_.ple_conv_kernel - 1) * q_.ngram.n, q_.hc * h.n_embd}, ir::Placement::Device});
    m.add_state("ngram_hist", ir::StateKind::Ring, {ir::ElemType::I64, {S, q_.ngram.n - 1}, ir::Placement::Device});
  }

  Value forward(StepGraph& g) const override {
    Value emb = g.b.embed(g.weight("token_embd"), g.ids);
    Value ple = q_.ple_layer >= 0 ? ple_embedding(g) : Value();
    Value res = Builder::named(streams(g, emb), "res");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      if (l == q_.ple_layer) res = ple_block(g, res, ple, l);
      Mix m = mix(g, res, fmt::format("blk.{}.hc_attn_", l));
      Value out = layers_.recurrent(l) ? layers_.delta_net(g, m.mixed, l) : attention(g, m.mixed, l);
      res = combine(g, res, out, m.inject);
      m = mix(g, res, fmt::format("blk.{}.hc_ffn_", l));
      res = Builder::named(combine(g, res, layers_.ffn(g, m.mixed, l), m.inject), fmt::format("res{}", l));
    }
    return res;
  }

  // The head mixes the output rows x [R, hc, D] with output_hc_* (no
  // inject, no output_norm).
  Value head(StepGraph& g, Value rows) const override {
    const Dim n_rows = rows.type().shape[0];
    return g.output(mix(g, rows, "output_hc_", false, n_rows).mixed);
  }

 private:
  bool uses_indexer(int64_t l) const { return !layers_.recurrent(l) && q_.ratios[size_t(l)] > 0; }

  // hc copies of x [n, D] side by side: [n, hc, D].
  Value streams(StepGraph& g, Value x, std::optional<Dim> rows = std::nullopt) const {
    Value one = g.b.reshape(x, {rows.value_or(g.n), 1, h.n_embd});
    return g.b.concat(std::vector<Value>(size_t(q_.hc), one), 1);
  }

  // rms_norm of each stream of x [n, hc*D or hc, D] with the [hc*D] gain `weight`.
  Value grouped_norm(StepGraph& g, Value x, const std::string& weight, const Dim& n) const {
    Value gain = g.b.reshape(g.weight(weight), {q_.hc, h.n_embd});
    return g.b.rms_norm(g.b.reshape(x, {n, q_.hc, h.n_embd}), gain, h.eps);
  }

  struct Mix {
    Value mixed, inject;  // [n, D], [n, hc]
  };

  Mix mix(StepGraph& g, Value res, const std::string& prefix, bool with_inject = true,
          std::optional<Dim> rows = std::nullopt) const {
    Builder& b = g.b;
    const Dim n = rows.value_or(g.n);
    const int64_t hc = q_.hc, d = h.n_embd;
    Value xn = b.reshape(grouped_norm(g, res, prefix + "norm", n), {n, hc * d});
    Value low = b.silu(b.scale(g.linear_plain(xn, prefix + "down"), 1.0 / double(hc)));
    Value gate = b.sigmoid(g.linear_plain(low, prefix + "up"));
    Value gated = b.reshape(b.mul(xn, gate), {n, hc, d});
    // The streams' mean, summed in stream order as the reference does.
    Value sum = b.slice(gated, 1, 0, 1);
    for (int64_t c = 1; c < hc; ++c) sum = b.add(sum, b.slice(gated, 1, c, 1));
    Mix m{b.scale(b.reshape(sum, {n, d}), 1.0 / double(hc)), Value()};
    if (with_inject) m.inject = g.linear_plain(xn, prefix + "inject");
    return m;
  }

  // res + out * 2 sigmoid(inject / hc), out [n, D] broadcast over the streams.
  Value combine(StepGraph& g, Value res, Value out, Value inject) const {
    Builder& b = g.b;
    Value weight = b.scale(b.sigmoid(b.scale(inject, 1.0 / double(q_.hc))), 2.0);
    return b.add(res, b.mul(streams(g, out), b.reshape(weight, {g.n, q_.hc, 1})));
  }

  // The token's n-gram rows, [n, heads * head_dim]; advances @ngram_hist.
  Value ple_embedding(StepGraph& g) const {
    Builder& b = g.b;
    Value history = b.state_read("ngram_hist");
    Value rows = Builder::named(b.ngram_hash(g.ids, g.seq, history, q_.ngram), "ple_rows");
    b.state_write("ngram_hist", b.ngram_roll(history, g.ids, g.seq, q_.ngram.eos));
    return b.reshape(b.embed(g.weight("per_layer_token_embd"), rows), {g.n, h.n_embd});
  }

  Value ple_block(StepGraph& g, Value res, Value e, int64_t l) const {
    Builder& b = g.b;
    const Dim& n = g.n;
    const std::string blk = fmt::format("blk.{}.", l);
    const int64_t hc = q_.hc, d = h.n_embd;
    Value key = grouped_norm(g, g.linear_plain(e, blk + "ple_key"), blk + "ple_norm_key", n);
    Value query = grouped_norm(g, res, blk + "ple_norm_query", n);
    Value s = b.scale(b.sum(b.mul(key, query)), double(1.0f / std::sqrt(float(d))));
    Value magnitude = b.sqrt(b.clamp(b.abs(s), 1e-6, std::numeric_limits<double>::infinity()));
    Value gate = b.sigmoid(b.mul(b.sign(s), magnitude));
    Value gated = b.mul(streams(g, g.linear_plain(e, blk + "ple_value")), gate);
    Value normed = b.reshape(grouped_norm(g, gated, blk + "ple_norm_conv", n), {n, hc * d});
    // Quantized files keep this kernel in f16; the reference casts it to f32 too.
    Value kernel = g.weight(blk + "ple_conv1d");
    if (kernel.type().elem.kind() != ir::ElemType::F32) kernel = b.cast(kernel, ir::ElemType::F32);
    Value conv = b.silu(b.causal_conv1d(normed, kernel, g.seq, fmt::format("ple_conv.{}", l), q_.ngram.n));
    return b.add(res, b.add(gated, b.reshape(conv, {n, hc, d})));
  }

  Value attention(StepGraph& g, Value x, int64_t l) const {
    if (!uses_indexer(l)) return layers_.gated_attention(g, x, l);
    Builder& b = g.b;
    const std::string blk = fmt::format("blk.{}.indexer.", l);
    const HybridLayers::Rope rope = layers_.attention_rope(g);
    Value q = b.reshape(g.linear_plain(x, blk + "q_proj"), {g.n, q_.indexer_heads, q_.indexer_dim});
    q = b.rope(g.norm(q, blk + "q_norm"), rope.pos, rope.options);
    Value k = g.linear_plain(x, blk + "k_proj");
    ir::IndexerOptions o{.state = fmt::format("idx.{}", l), .ratio = q_.ratios[size_t(l)], .top_k = q_.indexer_top_k,
                         .eps = h.eps, .rope = rope.options};
    Value selected = Builder::named(b.indexer_select(q, k, g.weight(blk + "k_norm"), g.pos, g.seq, o),
                                    fmt::format("selected{}", l));
    return layers_.gated_attention(g, x, l, selected);
  }

  DeltaNetHparams d_;
  Qwen4ExpHparams q_;
  const BuildOptions& o_;
  HybridLayers layers_;
};

}  // namespace

ir::Module build_qwen4exp(const gguf::GgufFile& f, const BuildOptions& o) { return build<Qwen4Exp>(f, o); }

}  // namespace vtc::arch
