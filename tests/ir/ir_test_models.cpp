#include "ir_test_models.h"

#include <string>

namespace vtc::ir::testing {

namespace {
constexpr int64_t kD = 64, kHeads = 4, kKvHeads = 2, kHeadDim = 16, kFfn = 128, kVocab = 256;

std::string blk(int l, const char* name) { return "blk." + std::to_string(l) + "." + name; }
}  // namespace

void declare_llama(Module& m, int layers, ElemType wt) {
  m.add_weight("token_embd", tensor({kVocab, kD}, wt), "token_embd.weight");
  for (int l = 0; l < layers; ++l) {
    m.add_weight(blk(l, "attn_norm"), tensor({kD}, ElemType::F32), blk(l, "attn_norm.weight"));
    m.add_weight(blk(l, "attn_q"), tensor({kHeads * kHeadDim, kD}, wt), blk(l, "attn_q.weight"));
    m.add_weight(blk(l, "attn_k"), tensor({kKvHeads * kHeadDim, kD}, wt), blk(l, "attn_k.weight"));
    m.add_weight(blk(l, "attn_v"), tensor({kKvHeads * kHeadDim, kD}, wt), blk(l, "attn_v.weight"));
    m.add_weight(blk(l, "attn_q_norm"), tensor({kHeadDim}, ElemType::F32), blk(l, "attn_q_norm.weight"));
    m.add_weight(blk(l, "attn_k_norm"), tensor({kHeadDim}, ElemType::F32), blk(l, "attn_k_norm.weight"));
    m.add_weight(blk(l, "attn_output"), tensor({kD, kHeads * kHeadDim}, wt), blk(l, "attn_output.weight"));
    m.add_weight(blk(l, "ffn_norm"), tensor({kD}, ElemType::F32), blk(l, "ffn_norm.weight"));
    m.add_weight(blk(l, "ffn_gate"), tensor({kFfn, kD}, wt), blk(l, "ffn_gate.weight"));
    m.add_weight(blk(l, "ffn_up"), tensor({kFfn, kD}, wt), blk(l, "ffn_up.weight"));
    m.add_weight(blk(l, "ffn_down"), tensor({kD, kFfn}, ElemType::F16), blk(l, "ffn_down.weight"));
    m.add_state("kv." + std::to_string(l), StateKind::Paged, tensor({2, P, 16, kKvHeads, kHeadDim}, ElemType::F16));
  }
  m.add_weight("output_norm", tensor({kD}, ElemType::F32), "output_norm.weight");
  m.add_weight("output", tensor({kVocab, kD}, ElemType::quant(GgmlType::Q4_0)), "output.weight");
  m.add_state("last_ids", StateKind::Plain, tensor({S}, ElemType::I32));
}

void build_llama_step(Module& m, const std::string& step, int layers) {
  Builder b(m, step);
  const Dim& n = step == "decode" ? S : T;  // decode: one token per sequence
  Value ids = step == "decode" ? b.state_read("last_ids") : b.arg("ids", tensor({T}, ElemType::I32));
  Value pos = b.arg("pos", tensor({n}, ElemType::I32));
  Value seq = b.arg("seq", tensor({n}, ElemType::I32));
  Value x = Builder::named(b.embed(b.weight("token_embd"), ids), "x");
  for (int l = 0; l < layers; ++l) {
    Value h = b.rms_norm(x, b.weight(blk(l, "attn_norm")), 1e-6);
    Value q = b.reshape(b.matmul(h, b.weight(blk(l, "attn_q"))), {n, kHeads, kHeadDim});
    Value k = b.reshape(b.matmul(h, b.weight(blk(l, "attn_k"))), {n, kKvHeads, kHeadDim});
    Value v = b.reshape(b.matmul(h, b.weight(blk(l, "attn_v"))), {n, kKvHeads, kHeadDim});
    q = b.rms_norm(q, b.weight(blk(l, "attn_q_norm")), 1e-6);  // qwen3 QK-norm
    k = b.rms_norm(k, b.weight(blk(l, "attn_k_norm")), 1e-6);
    RopeOptions rope{.mode = RopeMode::Neox, .n_rot = kHeadDim, .base = 1e6};
    q = Builder::named(b.rope(q, pos, rope), "q");
    k = Builder::named(b.rope(k, pos, rope), "k");
    Value a = b.attention(q, k, v, pos, seq, {.state = "kv." + std::to_string(l), .scale = 0.25});
    Value o = b.matmul(b.reshape(a, {n, kHeads * kHeadDim}), b.weight(blk(l, "attn_output")));
    x = b.add(x, o);
    h = b.rms_norm(x, b.weight(blk(l, "ffn_norm")), 1e-6);
    Value gate = b.silu(b.matmul(h, b.weight(blk(l, "ffn_gate"))));
    Value up = b.matmul(h, b.weight(blk(l, "ffn_up")));
    x = Builder::named(b.add(x, b.matmul(b.mul(gate, up), b.weight(blk(l, "ffn_down")))), "x");
  }
  // Prefill samples only each sequence's last token.
  if (step == "prefill") x = b.gather(x, b.arg("last", tensor({S}, ElemType::I32)), 0);
  Value logits = b.matmul(b.rms_norm(x, b.weight("output_norm"), 1e-6), b.weight("output"));
  Value tok = Builder::named(b.argmax(logits), "tok");
  b.state_write("last_ids", tok);
  b.ret({Builder::named(b.to_host(tok), "tok_host"), Builder::named(logits, "logits")});
}

Module make_llama_module(int layers) {
  Module m;
  declare_llama(m, layers, ElemType::quant(GgmlType::Q8_0));
  build_llama_step(m, "prefill", layers);
  build_llama_step(m, "decode", layers);
  return m;
}

Module make_ngram_decode(Placement hash_place, bool insert_to_host) {
  Module m;
  m.add_state("last_ids", StateKind::Plain, tensor({S}, ElemType::I32));
  m.add_state("ngram", StateKind::Ring, tensor({S, 2}, ElemType::I64, hash_place));
  m.add_weight("ple", tensor({64, 32}, ElemType::F16), "ple.weight");
  Builder b(m, "decode");
  Value seq = b.arg("seq", tensor({S}, ElemType::I32, hash_place));
  Value ids = Builder::named(b.state_read("last_ids"), "ids");  // sampled last step, on the device
  if (insert_to_host) ids = Builder::named(b.to_host(ids), "ids_host");
  Value history = b.state_read("ngram");
  b.set_placement(hash_place);
  NgramHashOptions o{.n = 3, .heads_per_gram = 2, .eos = 2, .mult = {11, 13, 17}, .vocab = {5, 6, 7, 8},
                     .offset = {0, 5, 11, 18}};
  Value rows = Builder::named(b.ngram_hash(ids, seq, history, o), "rows");
  b.state_write("ngram", b.ngram_roll(history, ids, seq, 2));
  b.set_placement(std::nullopt);
  Value dev_rows = hash_place == Placement::Host ? b.to_device(rows) : rows;
  Value emb = b.gather(b.weight("ple"), dev_rows, 0);
  b.ret({emb});
  return m;
}

}  // namespace vtc::ir::testing
