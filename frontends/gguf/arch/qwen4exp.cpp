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

void read_ple(const gguf::GgufFile& f, const DenseHparams& h, const DeltaNetHparams& d, Qwen4ExpHparams& q) {
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

Qwen4ExpHparams read_qwen4exp_hparams(const gguf::GgufFile& f, const DenseHparams& h, const DeltaNetHparams& d) {
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

class Qwen4Exp {
 public:
  Qwen4Exp(const DenseHparams& h, const DeltaNetHparams& d, const Qwen4ExpHparams& q)
      : h_(h), q_(q), layers_(h, d) {}

  void declare_states(ir::Module& m, const BuildOptions& o) const {
    layers_.declare_states(m, o);
    const Dim P = Dim::symbol("P"), S = Dim::symbol("S");
    for (int64_t l = 0; l < h_.n_layer; ++l)
      if (uses_indexer(l))
        m.add_state(fmt::format("idx.{}", l), ir::StateKind::Paged,
                    {o.kv_type, {1, P, o.kv_page_tokens, q_.indexer_dim}, ir::Placement::Device});
    if (q_.ple_layer < 0) return;
    m.add_state(fmt::format("ple_conv.{}", q_.ple_layer), ir::StateKind::Plain,
                {ir::ElemType::F32, {S, (q_.ple_conv_kernel - 1) * q_.ngram.n, q_.hc * h_.n_embd}, ir::Placement::Device});
    m.add_state("ngram_hist", ir::StateKind::Ring, {ir::ElemType::I64, {S, q_.ngram.n - 1}, ir::Placement::Device});
  }

  Value forward(Builder& b, Value ids, Value pos, Value seq, const Dim& n) const {
    Value emb = b.embed(b.weight("token_embd"), ids);
    Value ple = q_.ple_layer >= 0 ? ple_embedding(b, ids, seq, n) : Value();
    Value res = Builder::named(streams(b, emb, n), "res");
    for (int64_t l = 0; l < h_.n_layer; ++l) {
      if (l == q_.ple_layer) res = ple_block(b, res, ple, seq, n, l);
      Mix m = mix(b, res, fmt::format("blk.{}.hc_attn_", l), n);
      Value out = layers_.recurrent(l) ? layers_.delta_net(b, m.mixed, seq, n, l) : attention(b, m.mixed, pos, seq, n, l);
      res = combine(b, res, out, m.inject, n);
      m = mix(b, res, fmt::format("blk.{}.hc_ffn_", l), n);
      res = Builder::named(combine(b, res, layers_.ffn(b, m.mixed, l), m.inject, n), fmt::format("res{}", l));
    }
    return res;
  }

  // The head's mixer over the output rows x [R, hc, D].
  Value final_norm(Builder& b, Value x) const {
    const Dim rows = x.type().shape[0];
    return mix(b, x, "output_hc_", rows, false).mixed;
  }

 private:
  bool uses_indexer(int64_t l) const { return !layers_.recurrent(l) && q_.ratios[size_t(l)] > 0; }

  // hc copies of x [n, D] side by side: [n, hc, D].
  Value streams(Builder& b, Value x, const Dim& n) const {
    Value one = b.reshape(x, {n, 1, h_.n_embd});
    return b.concat(std::vector<Value>(size_t(q_.hc), one), 1);
  }

  // rms_norm of each stream of x [n, hc*D or hc, D] with the [hc*D] gain `weight`.
  Value grouped_norm(Builder& b, Value x, const std::string& weight, const Dim& n) const {
    Value gain = b.reshape(b.weight(weight), {q_.hc, h_.n_embd});
    return b.rms_norm(b.reshape(x, {n, q_.hc, h_.n_embd}), gain, h_.eps);
  }

  struct Mix {
    Value mixed, inject;  // [n, D], [n, hc]
  };

  Mix mix(Builder& b, Value res, const std::string& prefix, const Dim& n, bool with_inject = true) const {
    const int64_t hc = q_.hc, d = h_.n_embd;
    Value xn = b.reshape(grouped_norm(b, res, prefix + "norm", n), {n, hc * d});
    Value low = b.silu(b.scale(b.matmul(xn, b.weight(prefix + "down")), 1.0 / double(hc)));
    Value gate = b.sigmoid(b.matmul(low, b.weight(prefix + "up")));
    Value gated = b.reshape(b.mul(xn, gate), {n, hc, d});
    // The streams' mean, summed in stream order as the reference does.
    Value sum = b.slice(gated, 1, 0, 1);
    for (int64_t c = 1; c < hc; ++c) sum = b.add(sum, b.slice(gated, 1, c, 1));
    Mix m{b.scale(b.reshape(sum, {n, d}), 1.0 / double(hc)), Value()};
    if (with_inject) m.inject = b.matmul(xn, b.weight(prefix + "inject"));
    return m;
  }

  // res + out * 2 sigmoid(inject / hc), out [n, D] broadcast over the streams.
  Value combine(Builder& b, Value res, Value out, Value inject, const Dim& n) const {
    Value weight = b.scale(b.sigmoid(b.scale(inject, 1.0 / double(q_.hc))), 2.0);
    return b.add(res, b.mul(streams(b, out, n), b.reshape(weight, {n, q_.hc, 1})));
  }

  // The token's n-gram rows, [n, heads * head_dim]; advances @ngram_hist.
  Value ple_embedding(Builder& b, Value ids, Value seq, const Dim& n) const {
    Value history = b.state_read("ngram_hist");
    Value rows = Builder::named(b.ngram_hash(ids, seq, history, q_.ngram), "ple_rows");
    b.state_write("ngram_hist", b.ngram_roll(history, ids, seq, q_.ngram.eos));
    return b.reshape(b.embed(b.weight("per_layer_token_embd"), rows), {n, h_.n_embd});
  }

  Value ple_block(Builder& b, Value res, Value e, Value seq, const Dim& n, int64_t l) const {
    const std::string blk = fmt::format("blk.{}.", l);
    const int64_t hc = q_.hc, d = h_.n_embd;
    Value key = grouped_norm(b, b.matmul(e, b.weight(blk + "ple_key")), blk + "ple_norm_key", n);
    Value query = grouped_norm(b, res, blk + "ple_norm_query", n);
    Value s = b.scale(b.sum(b.mul(key, query)), double(1.0f / std::sqrt(float(d))));
    Value magnitude = b.sqrt(b.clamp(b.abs(s), 1e-6, std::numeric_limits<double>::infinity()));
    Value gate = b.sigmoid(b.mul(b.sign(s), magnitude));
    Value gated = b.mul(streams(b, b.matmul(e, b.weight(blk + "ple_value")), n), gate);
    Value normed = b.reshape(grouped_norm(b, gated, blk + "ple_norm_conv", n), {n, hc * d});
    // Quantized files keep this kernel in f16; the reference casts it to f32 too.
    Value kernel = b.weight(blk + "ple_conv1d");
    if (kernel.type().elem.kind() != ir::ElemType::F32) kernel = b.cast(kernel, ir::ElemType::F32);
    Value conv = b.silu(b.causal_conv1d(normed, kernel, seq, fmt::format("ple_conv.{}", l), q_.ngram.n));
    return b.add(res, b.add(gated, b.reshape(conv, {n, hc, d})));
  }

  Value attention(Builder& b, Value h, Value pos, Value seq, const Dim& n, int64_t l) const {
    if (!uses_indexer(l)) return layers_.gated_attention(b, h, pos, seq, n, l);
    const std::string blk = fmt::format("blk.{}.indexer.", l);
    const HybridLayers::Rope rope = layers_.attention_rope(b, pos, n);
    Value q = b.reshape(b.matmul(h, b.weight(blk + "q_proj")), {n, q_.indexer_heads, q_.indexer_dim});
    q = b.rope(b.rms_norm(q, b.weight(blk + "q_norm"), h_.eps), rope.pos, rope.options);
    Value k = b.matmul(h, b.weight(blk + "k_proj"));
    ir::IndexerOptions o{.state = fmt::format("idx.{}", l), .ratio = q_.ratios[size_t(l)], .top_k = q_.indexer_top_k,
                         .eps = h_.eps, .rope = rope.options};
    Value selected = Builder::named(b.indexer_select(q, k, b.weight(blk + "k_norm"), pos, seq, o),
                                    fmt::format("selected{}", l));
    return layers_.gated_attention(b, h, pos, seq, n, l, selected);
  }

  const DenseHparams& h_;
  const Qwen4ExpHparams& q_;
  HybridLayers layers_;
};

}  // namespace

ir::Module build_qwen4exp(const gguf::GgufFile& f, const BuildOptions& o) {
  const DenseHparams h = read_dense_hparams(f);
  const DeltaNetHparams d = read_deltanet_hparams(f, h);
  const Qwen4ExpHparams q = read_qwen4exp_hparams(f, h, d);
  const Qwen4Exp model(h, d, q);
  DecoderHooks hooks;
  hooks.declare_states = [&](ir::Module& m) { model.declare_states(m, o); };
  hooks.forward = [&](Builder& b, Value ids, Value pos, Value seq, const Dim& n) {
    return model.forward(b, ids, pos, seq, n);
  };
  hooks.final_norm = [&](Builder& b, Value x) { return model.final_norm(b, x); };
  return build_decoder(f, o, h, hooks);
}

}  // namespace vtc::arch
