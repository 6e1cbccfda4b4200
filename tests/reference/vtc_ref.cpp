// vtc-ref: a small harness over the prebuilt llama.cpp reference library.
//
// Tests run it as a subprocess to get the reference's answer for something
// vtc computes itself: logits and greedy tokens of a model, a quantized copy
// of a model, token ids of a text, the f32 values of a stored tensor, and
// ggml's type table. It is compiled against the headers of the matching
// llama.cpp source (include/llama.h, ggml/include/*.h) and links the
// prebuilt libllama/libggml; see docs/reference.md.
//
//   vtc-ref logits MODEL.gguf --tokens 1,2,3 [--n-predict N] [--threads N]
//           [--no-repack] [--ubatch N] [--dump DIR] [--cache-type-k T] [--cache-type-v T]
//           [--prompt-batch N] [--dump-at P]
//   vtc-ref quantize IN.gguf OUT.gguf TYPE [--pure] [--threads N]
//           [--token-embedding-type T] [--output-tensor-type T]
//   vtc-ref tokenize VOCAB.gguf [--no-special] [--no-add-special] < text
//   vtc-ref detokenize VOCAB.gguf [--no-special] < ids
//   vtc-ref dequant FILE.gguf TENSOR_NAME OUT.f32
//   vtc-ref dequant FILE.gguf --all OUT_DIR
//   vtc-ref type-traits
//   vtc-ref mxfp4 IN.f32 OUT_DIR --cols C [--x X.f32]
//   vtc-ref gguf-dump FILE.gguf
//   vtc-ref bench MODEL.gguf [--pp N] [--tg N] [--reps N] [--threads N]
//           [--batch-rows B] [--batch-context C] [--batch-steps K] [--cache-type-k T] [--cache-type-v T]
//   vtc-ref verify-cost MODEL.gguf --max-k K [--context C] [--steps S] [--reps R] [--threads N]
//   vtc-ref chat-template TEMPLATE [--no-add-assistant] < messages.json
//   vtc-ref embeddings MODEL.gguf [--pooling none|mean|cls|last] [--threads N] < inputs.json
//
// Results go to stdout (JSON or plain text) or to the named files; the
// library's log goes to stderr only with --verbose (anywhere on the command
// line) or for errors. Exit status: 0 ok, 1 failure, 2 usage error.

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"
#include "llama.h"

#ifndef VTC_REF_BINS_DIR
#define VTC_REF_BINS_DIR ""
#endif

namespace {

bool g_verbose = false;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error(message); }

void log_callback(ggml_log_level level, const char* text, void*) {
  if (g_verbose || level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

// Backends are loaded once, before any model: the prebuilt library keeps
// its CPU kernels in per-microarchitecture plugins next to it.
void load_backends() {
  static bool loaded = false;
  if (loaded) return;
  loaded = true;
  llama_log_set(log_callback, nullptr);
  const char* env = std::getenv("VTC_REF_BINS_DIR");
  const std::string dir = env && *env ? env : VTC_REF_BINS_DIR;
  if (dir.empty()) fail("no backend directory: set VTC_REF_BINS_DIR");
  ggml_backend_load_all_from_path(dir.c_str());
  if (ggml_backend_reg_count() == 0) fail("no ggml backends could be loaded from " + dir);
  llama_backend_init();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

long parse_int(const std::string& s, const char* what) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0) throw UsageError(std::string("bad ") + what + ": " + s);
  return v;
}

// Positional arguments and --flags of one subcommand.
struct Args {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> options;  // "--x" -> value ("" for flags)

  static Args parse(int argc, char** argv, int first, const std::vector<std::string>& valued) {
    Args a;
    for (int i = first; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
        if (std::find(valued.begin(), valued.end(), arg) != valued.end()) {
          if (i + 1 >= argc) throw UsageError(arg + " needs a value");
          a.options.emplace_back(arg, argv[++i]);
        } else {
          a.options.emplace_back(arg, "");
        }
      } else {
        a.positional.push_back(arg);
      }
    }
    return a;
  }
  std::optional<std::string> get(const std::string& name) const {
    for (const auto& [k, v] : options)
      if (k == name) return v;
    return std::nullopt;
  }
  bool has(const std::string& name) const { return get(name).has_value(); }
  void allow(const std::vector<std::string>& known) const {
    for (const auto& [k, v] : options)
      if (std::find(known.begin(), known.end(), k) == known.end()) throw UsageError("unknown option " + k);
  }
};

// ---------------------------------------------------------------------------
// logits

int argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;  // ties keep the lowest id
  return best;
}

ggml_type ggml_type_from_name(const std::string& name);

// --cache-type-k / --cache-type-v T: the context's KV cache types, as
// llama.cpp's -ctk / -ctv set them (flash attention stays at its default,
// auto, which the CPU backend resolves to on).
void set_cache_types(const Args& a, llama_context_params& cp) {
  if (auto t = a.get("--cache-type-k")) cp.type_k = ggml_type_from_name(*t);
  if (auto t = a.get("--cache-type-v")) cp.type_v = ggml_type_from_name(*t);
}

// --dump DIR: every graph node of the prompt's batch (the eval callback sees
// them in execution order) is written as DIR/<seq>_<name>.f32 (f32 data, f16
// converted), with DIR/index.json listing {"file", "name", "op", "type",
// "ne": [4]}; nodes of other types are listed without a file.
struct DumpState {
  std::string dir;
  bool active = false;
  int seq = 0;
  nlohmann::json index = nlohmann::json::array();
};

bool dump_callback(ggml_tensor* t, bool ask, void* user) {
  auto* st = static_cast<DumpState*>(user);
  if (ask) return st->active;
  if (!st->active) return true;
  nlohmann::json e;
  e["name"] = t->name;
  e["op"] = ggml_op_desc(t);
  e["type"] = ggml_type_name(t->type);
  e["ne"] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
  if ((t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16) && ggml_is_contiguous(t)) {
    const int64_t n = ggml_nelements(t);
    std::vector<uint8_t> raw(ggml_nbytes(t));
    ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
    std::vector<float> f(static_cast<size_t>(n));
    if (t->type == GGML_TYPE_F32)
      std::memcpy(f.data(), raw.data(), raw.size());
    else
      ggml_fp16_to_fp32_row(reinterpret_cast<const ggml_fp16_t*>(raw.data()), f.data(), n);
    char file[64];
    std::snprintf(file, sizeof file, "%04d", st->seq);
    std::string fname = std::string(file) + "_" + t->name + ".f32";
    for (char& c : fname)
      if (c == '/' || c == ' ') c = '_';
    std::ofstream(st->dir + "/" + fname, std::ios::binary)
        .write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size() * sizeof(float)));
    e["file"] = fname;
  }
  st->index.push_back(std::move(e));
  ++st->seq;
  return true;
}

// The thread count of logits, quantize and grammar without --threads. The
// tests run two at a time on 2-core machines (ctest --parallel), and ggml's
// workers spin at every graph barrier: 4 threads there made a tiny model's
// run 4x slower than 1 (3.9 s against 0.95 s). Its kernels split work by
// output rows, so the results do not depend on the count.
constexpr const char* kOracleThreads = "1";

int cmd_logits(const Args& a) {
  a.allow({"--tokens", "--n-predict", "--threads", "--no-repack", "--verbose", "--dump", "--ubatch", "--logits-file",
           "--cache-type-k", "--cache-type-v", "--prompt-batch", "--dump-at"});
  if (a.positional.size() != 1) throw UsageError("logits MODEL.gguf --tokens 1,2,3");
  const auto tokens_arg = a.get("--tokens");
  if (!tokens_arg) throw UsageError("logits needs --tokens");
  std::vector<llama_token> tokens;
  {
    std::stringstream ss(*tokens_arg);
    std::string item;
    while (std::getline(ss, item, ',')) tokens.push_back(static_cast<llama_token>(parse_int(item, "token")));
  }
  if (tokens.empty()) throw UsageError("--tokens is empty");
  const int n_predict = static_cast<int>(parse_int(a.get("--n-predict").value_or("0"), "--n-predict"));
  const int threads = static_cast<int>(parse_int(a.get("--threads").value_or(kOracleThreads), "--threads"));
  if (n_predict < 0 || threads < 1) throw UsageError("bad --n-predict or --threads");
  // --ubatch N: the prompt still goes in one llama_decode call, but as
  // graphs of at most N rows (under 64, every row uses the one-row
  // flash-attention kernel; docs/numerics-parity.md).
  const int ubatch = static_cast<int>(parse_int(a.get("--ubatch").value_or("0"), "--ubatch"));
  if (ubatch < 0) throw UsageError("bad --ubatch");
  // --prompt-batch N: only the first N tokens go in the one llama_decode
  // call; each later token is decoded alone (its row's logits kept), as an
  // engine decodes after its prefill. 0: every token in the one call.
  const int prompt_batch = static_cast<int>(parse_int(a.get("--prompt-batch").value_or("0"), "--prompt-batch"));
  if (prompt_batch < 0) throw UsageError("bad --prompt-batch");

  load_backends();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  // --no-repack: plain ggml kernels, without the CPU backend's repacked
  // weight layouts (which quantize activations their own way).
  if (a.has("--no-repack")) mp.use_extra_bufts = false;
  llama_model* model = llama_model_load_from_file(a.positional[0].c_str(), mp);
  if (!model) fail("could not load model " + a.positional[0]);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  for (llama_token t : tokens)
    if (t < 0 || t >= n_vocab) fail("token id " + std::to_string(t) + " out of range");

  const int n_tokens = static_cast<int>(tokens.size());
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(std::max(n_tokens + n_predict, 16));
  cp.n_batch = static_cast<uint32_t>(std::max(n_tokens, 1));
  cp.n_ubatch = cp.n_batch;  // one ubatch: every position in one graph
  if (ubatch > 0) cp.n_ubatch = std::min<uint32_t>(cp.n_batch, static_cast<uint32_t>(ubatch));
  cp.n_seq_max = 1;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.no_perf = true;
  set_cache_types(a, cp);
  DumpState dump;
  // --dump-at P (with --dump and --prompt-batch): the one-token step of
  // position P instead of the prompt's batch.
  const int dump_at = static_cast<int>(parse_int(a.get("--dump-at").value_or("-1"), "--dump-at"));
  if (auto d = a.get("--dump")) {
    dump.dir = *d;
    dump.active = dump_at < 0;
    cp.cb_eval = dump_callback;
    cp.cb_eval_user_data = &dump;
  }
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) fail("could not create a context");

  bool all_finite = true;
  // --logits-file F: the prompt rows go to F as raw float32 (n_tokens rows
  // of n_vocab), not into the JSON. A 75-token prompt over a 151k vocab is
  // 11M numbers: as JSON text that was about 130 MB to print and parse
  // again, seconds of every e2e comparison.
  const auto logits_file = a.get("--logits-file");
  std::ofstream logits_out;
  if (logits_file) {
    logits_out.open(*logits_file, std::ios::binary | std::ios::trunc);
    if (!logits_out) fail("cannot write --logits-file " + *logits_file);
  }
  nlohmann::json logits = nlohmann::json::array();
  std::vector<llama_token> greedy;

  const int n_first = prompt_batch > 0 ? std::min(prompt_batch, n_tokens) : n_tokens;
  if (dump_at >= 0 && (!a.get("--dump") || dump_at < n_first || dump_at >= n_tokens))
    throw UsageError("--dump-at P dumps the one-token step of position P: it needs --dump, and P from the --prompt-batch "
                     "up to the last token's position");
  std::vector<float> last;
  auto keep_row = [&](const float* row, int i) {
    if (!row) fail("no logits for position " + std::to_string(i));
    for (int v = 0; v < n_vocab; ++v) all_finite = all_finite && std::isfinite(row[v]);
    if (logits_file) logits_out.write(reinterpret_cast<const char*>(row), std::streamsize(sizeof(float) * size_t(n_vocab)));
    else logits.push_back(std::vector<float>(row, row + n_vocab));
    if (i == n_tokens - 1) last.assign(row, row + n_vocab);
  };
  llama_batch batch = llama_batch_init(n_tokens, 0, 1);
  for (int i = 0; i < n_first; ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n_first;
  if (llama_decode(ctx, batch) != 0) fail("llama_decode failed on the prompt");
  auto finish_dump = [&] {
    dump.active = false;
    std::ofstream(dump.dir + "/index.json") << dump.index.dump(1) << "\n";
  };
  if (dump.active) finish_dump();
  for (int i = 0; i < n_first; ++i) keep_row(llama_get_logits_ith(ctx, i), i);
  for (int i = n_first; i < n_tokens; ++i) {
    batch.token[0] = tokens[i];
    batch.pos[0] = i;
    batch.n_tokens = 1;
    dump.active = i == dump_at;
    if (llama_decode(ctx, batch) != 0) fail("llama_decode failed at position " + std::to_string(i));
    if (i == dump_at) finish_dump();
    keep_row(llama_get_logits_ith(ctx, 0), i);
  }
  llama_batch_free(batch);

  for (int k = 0; k < n_predict; ++k) {
    const llama_token next = argmax(last.data(), n_vocab);
    greedy.push_back(next);
    if (k + 1 == n_predict) break;
    llama_batch one = llama_batch_init(1, 0, 1);
    one.token[0] = next;
    one.pos[0] = n_tokens + k;
    one.n_seq_id[0] = 1;
    one.seq_id[0][0] = 0;
    one.logits[0] = 1;
    one.n_tokens = 1;
    const int rc = llama_decode(ctx, one);
    llama_batch_free(one);
    if (rc != 0) fail("llama_decode failed at greedy step " + std::to_string(k));
    const float* row = llama_get_logits_ith(ctx, -1);
    last.assign(row, row + n_vocab);
    for (float f : last) all_finite = all_finite && std::isfinite(f);
  }

  nlohmann::json out;
  out["n_vocab"] = n_vocab;
  out["n_tokens"] = n_tokens;
  if (logits_file) {
    logits_out.close();
    if (!logits_out) fail("could not write --logits-file " + *logits_file);
    out["logits_file"] = *logits_file;
  } else {
    out["logits"] = std::move(logits);
  }
  out["greedy"] = greedy;
  out["all_finite"] = all_finite;
  std::cout << out.dump() << "\n";

  llama_free(ctx);
  llama_model_free(model);
  return 0;
}

// ---------------------------------------------------------------------------
// quantize

struct FtypeName {
  const char* name;
  llama_ftype ftype;
};

constexpr FtypeName kFtypes[] = {
    {"f32", LLAMA_FTYPE_ALL_F32},         {"f16", LLAMA_FTYPE_MOSTLY_F16},
    {"bf16", LLAMA_FTYPE_MOSTLY_BF16},    {"q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},
    {"q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},    {"q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},
    {"q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},    {"q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
    {"q2_k", LLAMA_FTYPE_MOSTLY_Q2_K},    {"q2_k_s", LLAMA_FTYPE_MOSTLY_Q2_K_S},
    {"q3_k_s", LLAMA_FTYPE_MOSTLY_Q3_K_S}, {"q3_k_m", LLAMA_FTYPE_MOSTLY_Q3_K_M},
    {"q3_k_l", LLAMA_FTYPE_MOSTLY_Q3_K_L}, {"q4_k_s", LLAMA_FTYPE_MOSTLY_Q4_K_S},
    {"q4_k_m", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"q5_k_s", LLAMA_FTYPE_MOSTLY_Q5_K_S},
    {"q5_k_m", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"q6_k", LLAMA_FTYPE_MOSTLY_Q6_K},
    {"iq2_xxs", LLAMA_FTYPE_MOSTLY_IQ2_XXS}, {"iq2_xs", LLAMA_FTYPE_MOSTLY_IQ2_XS},
    {"iq2_s", LLAMA_FTYPE_MOSTLY_IQ2_S},  {"iq2_m", LLAMA_FTYPE_MOSTLY_IQ2_M},
    {"iq3_xxs", LLAMA_FTYPE_MOSTLY_IQ3_XXS}, {"iq3_xs", LLAMA_FTYPE_MOSTLY_IQ3_XS},
    {"iq3_s", LLAMA_FTYPE_MOSTLY_IQ3_S},  {"iq3_m", LLAMA_FTYPE_MOSTLY_IQ3_M},
    {"iq1_s", LLAMA_FTYPE_MOSTLY_IQ1_S},  {"iq1_m", LLAMA_FTYPE_MOSTLY_IQ1_M},
    {"iq4_nl", LLAMA_FTYPE_MOSTLY_IQ4_NL}, {"iq4_xs", LLAMA_FTYPE_MOSTLY_IQ4_XS},
    {"tq1_0", LLAMA_FTYPE_MOSTLY_TQ1_0},  {"tq2_0", LLAMA_FTYPE_MOSTLY_TQ2_0},
    {"mxfp4_moe", LLAMA_FTYPE_MOSTLY_MXFP4_MOE}, {"mxfp4", LLAMA_FTYPE_MOSTLY_MXFP4_MOE},
};

llama_ftype ftype_from_name(const std::string& name) {
  const std::string n = lower(name);
  for (const auto& f : kFtypes)
    if (n == f.name) return f.ftype;
  std::string known;
  for (const auto& f : kFtypes) known += std::string(" ") + f.name;
  throw UsageError("unknown quantization type '" + name + "'; known:" + known);
}

ggml_type ggml_type_from_name(const std::string& name) {
  const std::string n = lower(name);
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const auto* tr = ggml_get_type_traits(static_cast<ggml_type>(t));
    if (tr->blck_size != 0 && tr->type_name && lower(tr->type_name) == n) return static_cast<ggml_type>(t);
  }
  throw UsageError("unknown ggml type '" + name + "'");
}

int cmd_quantize(const Args& a) {
  a.allow({"--pure", "--threads", "--token-embedding-type", "--output-tensor-type", "--verbose"});
  if (a.positional.size() != 3) throw UsageError("quantize IN.gguf OUT.gguf TYPE");
  llama_model_quantize_params qp = llama_model_quantize_default_params();
  qp.ftype = ftype_from_name(a.positional[2]);
  qp.nthread = static_cast<int32_t>(parse_int(a.get("--threads").value_or(kOracleThreads), "--threads"));
  qp.pure = a.has("--pure");
  if (auto t = a.get("--token-embedding-type")) qp.token_embedding_type = ggml_type_from_name(*t);
  if (auto t = a.get("--output-tensor-type")) qp.output_tensor_type = ggml_type_from_name(*t);
  load_backends();
  const uint32_t rc = llama_model_quantize(a.positional[0].c_str(), a.positional[1].c_str(), &qp);
  if (rc != 0) fail("llama_model_quantize failed (" + std::to_string(rc) + ")");
  return 0;
}

// ---------------------------------------------------------------------------
// tokenize

// The vocabulary of a GGUF (no weights); the caller frees it.
llama_model* load_vocab_only(const std::string& path) {
  load_backends();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(path.c_str(), mp);
  if (!model) fail("could not load vocabulary from " + path);
  return model;
}

int cmd_tokenize(const Args& a) {
  a.allow({"--no-special", "--no-add-special", "--verbose"});
  if (a.positional.size() != 1) throw UsageError("tokenize VOCAB.gguf < text");
  const bool parse_special = !a.has("--no-special");
  const bool add_special = !a.has("--no-add-special");
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());

  llama_model* model = load_vocab_only(a.positional[0]);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::vector<llama_token> ids(text.size() + 16);
  int32_t n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                             static_cast<int32_t>(ids.size()), add_special, parse_special);
  if (n < 0 && n != INT32_MIN) {
    ids.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                       static_cast<int32_t>(ids.size()), add_special, parse_special);
  }
  if (n < 0) fail("llama_tokenize failed");
  for (int32_t i = 0; i < n; ++i) std::cout << (i ? " " : "") << ids[static_cast<size_t>(i)];
  std::cout << "\n";
  llama_model_free(model);
  return 0;
}

// The text of whitespace-separated ids (llama_detokenize, remove_special
// off; --no-special drops control tokens), written as is, no newline added.
int cmd_detokenize(const Args& a) {
  a.allow({"--no-special", "--verbose"});
  if (a.positional.size() != 1) throw UsageError("detokenize VOCAB.gguf < ids");
  std::vector<llama_token> ids;
  for (std::string item; std::cin >> item;) ids.push_back(static_cast<llama_token>(parse_int(item, "token id")));

  llama_model* model = load_vocab_only(a.positional[0]);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  for (llama_token id : ids)
    if (id < 0 || id >= n_vocab) fail("token id " + std::to_string(id) + " is outside the vocabulary");
  std::string text(ids.size() * 16 + 16, '\0');
  const auto detok = [&] {
    return llama_detokenize(vocab, ids.data(), static_cast<int32_t>(ids.size()), text.data(),
                            static_cast<int32_t>(text.size()), /*remove_special=*/false, !a.has("--no-special"));
  };
  int32_t n = detok();
  if (n < 0) {
    text.resize(static_cast<size_t>(-n));
    n = detok();
  }
  if (n < 0) fail("llama_detokenize failed");
  std::cout.write(text.data(), n);
  llama_model_free(model);
  return 0;
}

// ---------------------------------------------------------------------------
// dequant

// Reads tensors through ggml's own GGUF parser (metadata into a no_alloc
// ggml context), their bytes straight from the file, and converts them with
// ggml_get_type_traits(type)->to_float.
class RefGguf {
 public:
  explicit RefGguf(const std::string& path) : path_(path) {
    gguf_init_params params{/*no_alloc=*/true, /*ctx=*/&ctx_};
    gguf_ = gguf_init_from_file(path.c_str(), params);
    if (!gguf_) fail("ggml could not parse " + path);
  }
  ~RefGguf() {
    if (gguf_) gguf_free(gguf_);
    if (ctx_) ggml_free(ctx_);
  }
  RefGguf(const RefGguf&) = delete;
  RefGguf& operator=(const RefGguf&) = delete;

  int64_t n_tensors() const { return gguf_get_n_tensors(gguf_); }
  std::string name(int64_t i) const { return gguf_get_tensor_name(gguf_, i); }

  struct Result {
    ggml_type type;
    std::vector<float> values;
  };
  Result to_float(const std::string& tensor_name) const {
    const int64_t id = gguf_find_tensor(gguf_, tensor_name.c_str());
    if (id < 0) fail("no tensor '" + tensor_name + "' in " + path_);
    const ggml_tensor* t = ggml_get_tensor(ctx_, tensor_name.c_str());
    if (!t) fail("tensor '" + tensor_name + "' missing from the ggml context");
    const int64_t n = ggml_nelements(t);
    const size_t n_bytes = ggml_nbytes(t);
    std::vector<char> raw(n_bytes);
    std::ifstream in(path_, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(gguf_get_data_offset(gguf_) + gguf_get_tensor_offset(gguf_, id)));
    in.read(raw.data(), static_cast<std::streamsize>(n_bytes));
    if (!in) fail("short read of tensor '" + tensor_name + "'");
    Result r{t->type, std::vector<float>(static_cast<size_t>(n))};
    if (t->type == GGML_TYPE_F32) {
      std::memcpy(r.values.data(), raw.data(), n_bytes);
    } else {
      const auto* traits = ggml_get_type_traits(t->type);
      if (!traits->to_float) fail(std::string("ggml has no to_float for ") + ggml_type_name(t->type));
      traits->to_float(raw.data(), r.values.data(), n);
    }
    return r;
  }

 private:
  std::string path_;
  ggml_context* ctx_ = nullptr;
  gguf_context* gguf_ = nullptr;
};

void write_floats(const std::string& path, const std::vector<float>& v) {
  static_assert(sizeof(float) == 4);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!out) fail("could not write " + path);
}

int cmd_dequant(const Args& a) {
  a.allow({"--all", "--verbose"});
  llama_log_set(log_callback, nullptr);
  if (const auto dir = a.get("--all")) {
    // dequant FILE.gguf --all OUT_DIR: every tensor to OUT_DIR/<name>.f32,
    // and an index on stdout: [{"name", "type", "n"}...].
    if (a.positional.size() != 1) throw UsageError("dequant FILE.gguf --all OUT_DIR");
    RefGguf g(a.positional[0]);
    nlohmann::json index = nlohmann::json::array();
    for (int64_t i = 0; i < g.n_tensors(); ++i) {
      const std::string name = g.name(i);
      auto r = g.to_float(name);
      write_floats(*dir + "/" + name + ".f32", r.values);
      index.push_back({{"name", name}, {"type", ggml_type_name(r.type)}, {"n", r.values.size()}});
    }
    std::cout << index.dump() << "\n";
    return 0;
  }
  if (a.positional.size() != 3) throw UsageError("dequant FILE.gguf TENSOR_NAME OUT.f32");
  RefGguf g(a.positional[0]);
  auto r = g.to_float(a.positional[1]);
  write_floats(a.positional[2], r.values);
  return 0;
}

// ---------------------------------------------------------------------------
// gguf-dump

// ggml's own view of a GGUF file's structure, for checking vtc's reader:
// version, alignment, data offset, every key with its value type (and
// array element type and length, or string value), every tensor's type,
// offset, size and dims.
int cmd_gguf_dump(const Args& a) {
  a.allow({"--verbose"});
  if (a.positional.size() != 1) throw UsageError("gguf-dump FILE.gguf");
  const std::string path = a.positional[0];
  ggml_context* ctx = nullptr;
  gguf_init_params params{/*no_alloc=*/true, /*ctx=*/&ctx};
  gguf_context* g = gguf_init_from_file(path.c_str(), params);
  if (!g) fail("ggml could not parse " + path);
  nlohmann::json out;
  out["version"] = gguf_get_version(g);
  out["alignment"] = gguf_get_alignment(g);
  out["data_offset"] = gguf_get_data_offset(g);
  nlohmann::json kvs = nlohmann::json::array();
  for (int64_t i = 0; i < gguf_get_n_kv(g); ++i) {
    nlohmann::json kv = {{"key", gguf_get_key(g, i)}, {"type", int(gguf_get_kv_type(g, i))}};
    if (gguf_get_kv_type(g, i) == GGUF_TYPE_ARRAY) {
      kv["elem_type"] = int(gguf_get_arr_type(g, i));
      kv["n"] = gguf_get_arr_n(g, i);
    } else if (gguf_get_kv_type(g, i) == GGUF_TYPE_STRING) {
      kv["value"] = gguf_get_val_str(g, i);
    }
    kvs.push_back(std::move(kv));
  }
  out["kv"] = std::move(kvs);
  nlohmann::json tensors = nlohmann::json::array();
  for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
    const ggml_tensor* t = ggml_get_tensor(ctx, gguf_get_tensor_name(g, i));
    std::vector<int64_t> dims;
    for (int d = 0; d < ggml_n_dims(t); ++d) dims.push_back(t->ne[d]);
    tensors.push_back({{"name", gguf_get_tensor_name(g, i)},
                       {"type", int(gguf_get_tensor_type(g, i))},
                       {"offset", gguf_get_tensor_offset(g, i)},
                       {"size", gguf_get_tensor_size(g, i)},
                       {"dims", dims}});
  }
  out["tensors"] = std::move(tensors);
  gguf_free(g);
  ggml_free(ctx);
  std::cout << out.dump() << "\n";
  return 0;
}

// ---------------------------------------------------------------------------
// chat-template

// chat-template TEMPLATE [--no-add-assistant] < messages.json: the
// reference's llama_chat_apply_template on [{"role","content"}...]; the
// formatted prompt goes to stdout verbatim.
int cmd_chat_template(const Args& a) {
  a.allow({"--no-add-assistant", "--verbose"});
  if (a.positional.size() != 1) throw UsageError("chat-template TEMPLATE < messages.json");
  const auto messages = nlohmann::json::parse(std::cin);
  std::vector<std::string> roles, contents;
  for (const auto& m : messages) {
    roles.push_back(m.at("role").get<std::string>());
    contents.push_back(m.at("content").get<std::string>());
  }
  std::vector<llama_chat_message> chat;
  for (size_t i = 0; i < roles.size(); ++i) chat.push_back({roles[i].c_str(), contents[i].c_str()});
  const bool add_assistant = !a.has("--no-add-assistant");
  std::vector<char> buf(4096);
  int32_t n = llama_chat_apply_template(a.positional[0].c_str(), chat.data(), chat.size(), add_assistant,
                                        buf.data(), int32_t(buf.size()));
  if (n < 0) fail("the reference does not support this template");
  if (size_t(n) > buf.size()) {
    buf.resize(size_t(n));
    n = llama_chat_apply_template(a.positional[0].c_str(), chat.data(), chat.size(), add_assistant,
                                  buf.data(), int32_t(buf.size()));
  }
  std::cout.write(buf.data(), n);
  return 0;
}

// ---------------------------------------------------------------------------
// bench

// bench MODEL --pp N --tg N --reps N --threads N: llama-bench style
// throughput with the library's default kernels (what users run). pp: one
// batch of N prompt tokens; tg: N single-token decodes from an empty
// context. One warm-up repetition first.
//
// --batch-rows B (with --batch-context C, --batch-steps K): the batched
// decode step, as vtc bench measures it (runtime/bench.h). A second context
// with n_seq_max = B (one KV stream per sequence, the library's default)
// gets C prompt tokens in each of sequences 0..B-1 (once); then each
// repetition times K one-row steps on sequence 0 and K steps of one batch
// of B rows (one token per sequence, B seq ids, logits for every row), ms
// per step; positions keep growing across repetitions.
// JSON {"pp": [tok/s...], "tg": [...], "step1_ms": [...], "stepn_ms": [...],
// "context_prefill_ms": ms}.
struct BenchArgs {
  int pp = 512, tg = 128, reps = 3, threads = 2;
  int batch_rows = 0, batch_context = 64, batch_steps = 16;
  std::optional<std::string> type_k, type_v;
};

BenchArgs parse_bench_args(const Args& a) {
  a.allow({"--pp", "--tg", "--reps", "--threads", "--batch-rows", "--batch-context", "--batch-steps", "--verbose",
           "--cache-type-k", "--cache-type-v"});
  if (a.positional.size() != 1) throw UsageError("bench MODEL.gguf [--pp N] [--tg N] [--reps N] [--threads N]");
  BenchArgs b;
  b.type_k = a.get("--cache-type-k");
  b.type_v = a.get("--cache-type-v");
  auto num = [&](const char* name, int fallback) {
    return static_cast<int>(parse_int(a.get(name).value_or(std::to_string(fallback)), name));
  };
  b.pp = num("--pp", b.pp);
  b.tg = num("--tg", b.tg);
  b.reps = num("--reps", b.reps);
  b.threads = num("--threads", b.threads);
  b.batch_rows = num("--batch-rows", b.batch_rows);
  b.batch_context = num("--batch-context", b.batch_context);
  b.batch_steps = num("--batch-steps", b.batch_steps);
  if (b.pp < 0 || b.tg < 0 || b.reps < 1 || b.threads < 1) throw UsageError("bad --pp, --tg, --reps or --threads");
  if (b.batch_rows < 0 || b.batch_context < 1 || b.batch_steps < 1)
    throw UsageError("bad --batch-rows, --batch-context or --batch-steps");
  return b;
}

// One llama_decode of the batch's first n rows; row i is token[i] of
// sequence seq[i] at pos[i]. Waits for the result.
void decode_rows(llama_context* ctx, llama_batch& batch, int n, const std::vector<llama_token>& token,
                 const std::vector<int>& seq, const std::vector<int>& pos, bool all_logits) {
  batch.n_tokens = n;
  for (int i = 0; i < n; ++i) {
    batch.token[i] = token[size_t(i)];
    batch.pos[i] = pos[size_t(i)];
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = seq[size_t(i)];
    batch.logits[i] = all_logits || i == n - 1;
  }
  if (llama_decode(ctx, batch) != 0) fail("llama_decode failed");
  llama_synchronize(ctx);
}

llama_context* bench_context(llama_model* model, const BenchArgs& b, uint32_t n_ctx, uint32_t n_batch, uint32_t n_seq) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n_ctx;
  cp.n_batch = n_batch;
  cp.n_ubatch = std::min<uint32_t>(n_batch, 512);
  cp.n_seq_max = n_seq;
  cp.n_threads = b.threads;
  cp.n_threads_batch = b.threads;
  cp.no_perf = true;
  if (b.type_k) cp.type_k = ggml_type_from_name(*b.type_k);
  if (b.type_v) cp.type_v = ggml_type_from_name(*b.type_v);
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) fail("could not create a context");
  return ctx;
}

// Token ids as llama-bench uses them: arbitrary in-vocabulary values.
llama_token bench_token(int64_t i, int n_vocab) { return static_cast<llama_token>((i * 7919 + 13) % n_vocab); }

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void bench_pp_tg(llama_model* model, const BenchArgs& b, int n_vocab, nlohmann::json& out) {
  llama_context* ctx = bench_context(model, b, uint32_t(std::max(b.pp, b.tg) + 16), uint32_t(std::max(b.pp, 1)), 1);
  llama_batch batch = llama_batch_init(std::max(b.pp, 1), 0, 1);
  std::vector<llama_token> prompt(size_t(std::max(b.pp, 1)));
  std::vector<int> zeros(prompt.size(), 0), pos(prompt.size());
  for (size_t i = 0; i < prompt.size(); ++i) {
    prompt[i] = bench_token(int64_t(i), n_vocab);
    pos[i] = int(i);
  }
  nlohmann::json pp_rates = nlohmann::json::array(), tg_rates = nlohmann::json::array();
  for (int rep = -1; rep < b.reps; ++rep) {
    llama_memory_clear(llama_get_memory(ctx), true);
    auto t0 = Clock::now();
    if (b.pp > 0) decode_rows(ctx, batch, b.pp, prompt, zeros, pos, false);
    const double pp_s = seconds_since(t0);
    llama_memory_clear(llama_get_memory(ctx), true);
    t0 = Clock::now();
    for (int i = 0; i < b.tg; ++i) decode_rows(ctx, batch, 1, {bench_token(i, n_vocab)}, {0}, {i}, false);
    const double tg_s = seconds_since(t0);
    if (rep < 0) continue;
    if (b.pp > 0) pp_rates.push_back(b.pp / pp_s);
    if (b.tg > 0) tg_rates.push_back(b.tg / tg_s);
  }
  llama_batch_free(batch);
  llama_free(ctx);
  out["pp"] = pp_rates;
  out["tg"] = tg_rates;
}

// `steps` llama_decode calls of the rows (sequence i at pos[i], then one
// further), logits for every row; returns ms per step.
double time_steps(llama_context* ctx, llama_batch& batch, int steps, const std::vector<int>& seqs, std::vector<int>& pos) {
  const std::vector<llama_token> ones(seqs.size(), 1);
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    decode_rows(ctx, batch, int(seqs.size()), ones, seqs, pos, true);
    for (int& p : pos) ++p;
  }
  return 1e3 * seconds_since(t0) / steps;
}

void bench_batch_step(llama_model* model, const BenchArgs& b, int n_vocab, nlohmann::json& out) {
  const int rows = b.batch_rows, c = b.batch_context, k = b.batch_steps;
  const uint32_t per_seq = uint32_t(c + 2 * k * (b.reps + 1) + 16);
  const int n_batch = std::max(c, rows);
  llama_context* ctx = bench_context(model, b, per_seq * uint32_t(rows), uint32_t(n_batch), uint32_t(rows));
  llama_batch batch = llama_batch_init(n_batch, 0, 1);
  std::vector<int> iota(static_cast<size_t>(n_batch));
  for (size_t i = 0; i < iota.size(); ++i) iota[i] = int(i);
  const auto prefill_start = Clock::now();
  for (int s = 0; s < rows; ++s) {  // once, as vtc bench does, and timed as it times it
    std::vector<llama_token> prompt(static_cast<size_t>(c));
    for (int i = 0; i < c; ++i) prompt[size_t(i)] = bench_token(int64_t(s) * c + i, n_vocab);
    decode_rows(ctx, batch, c, prompt, std::vector<int>(static_cast<size_t>(c), s), iota, false);
  }
  out["context_prefill_ms"] = 1e3 * seconds_since(prefill_start);
  const std::vector<int> seqs(iota.begin(), iota.begin() + rows);
  std::vector<int> pos(static_cast<size_t>(rows), c), pos0{c};  // sequence 0 also holds the 1-row steps
  nlohmann::json one = nlohmann::json::array(), many = nlohmann::json::array();
  for (int rep = -1; rep < b.reps; ++rep) {
    const double one_ms = time_steps(ctx, batch, k, {0}, pos0);
    pos[0] = pos0[0];
    const double many_ms = time_steps(ctx, batch, k, seqs, pos);
    pos0[0] = pos[0];
    if (rep < 0) continue;
    one.push_back(one_ms);
    many.push_back(many_ms);
  }
  llama_batch_free(batch);
  llama_free(ctx);
  out["step1_ms"] = one;
  out["stepn_ms"] = many;
}

// The loaded CPU backend's compiled-in instruction sets (ggml's feature
// list: "AVX2 AVX512 AVX512_VNNI ..."), which name the variant
// ggml_backend_load_all picked for this machine.
std::string cpu_backend_features() {
  ggml_backend_reg_t reg = ggml_backend_reg_by_name("CPU");
  if (reg == nullptr) return "";
  auto get = reinterpret_cast<ggml_backend_get_features_t>(ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"));
  if (get == nullptr) return "";
  std::string s;
  for (const ggml_backend_feature* f = get(reg); f != nullptr && f->name != nullptr; ++f)
    if (std::string(f->value) == "1") s += (s.empty() ? "" : " ") + std::string(f->name);
  return s;
}

// The benchmarks' model: CPU backends loaded, logging through ours, no
// layer offloaded.
llama_model* load_cpu_model(const std::string& path) {
  load_backends();
  llama_log_set(log_callback, nullptr);
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(path.c_str(), mp);
  if (!model) fail("could not load model " + path);
  return model;
}

int cmd_bench(const Args& a) {
  const BenchArgs b = parse_bench_args(a);
  llama_model* model = load_cpu_model(a.positional[0]);
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  nlohmann::json out;
  out["cpu_features"] = cpu_backend_features();
  bench_pp_tg(model, b, n_vocab, out);
  if (b.batch_rows > 0) bench_batch_step(model, b, n_vocab, out);
  llama_model_free(model);
  std::cout << out.dump() << "\n";
  return 0;
}

// ---------------------------------------------------------------------------
// verify-cost

// verify-cost MODEL --max-k K [--context C] [--steps S] [--reps R]
// [--threads N]: the cost of a speculative verify step on one sequence, as
// `vtc bench --verify-cost` measures vtc's. After C prompt tokens, each
// repetition (after a warm-up) times S llama_decode calls of 1 + k tokens
// of sequence 0 at positions C.., logits for every row, for k = 0..K (k = 0
// is the plain decode step); before each call the positions from C on are
// removed (llama_memory_seq_rm, as llama-lookup does after a rejection), so
// every call writes the same positions. JSON {"ms": [[per rep] per k]}.
int cmd_verify_cost(const Args& a) {
  a.allow({"--max-k", "--context", "--steps", "--reps", "--threads", "--verbose"});
  if (a.positional.size() != 1 || !a.has("--max-k"))
    throw UsageError("verify-cost MODEL.gguf --max-k K [--context C] [--steps S] [--reps R] [--threads N]");
  auto num = [&](const char* name, int fallback) {
    return static_cast<int>(parse_int(a.get(name).value_or(std::to_string(fallback)), name));
  };
  BenchArgs b;
  b.threads = num("--threads", 2);
  b.reps = num("--reps", 3);
  const int max_k = num("--max-k", 8), c = num("--context", 64), steps = num("--steps", 16);
  if (max_k < 0 || c < 1 || steps < 1 || b.reps < 1 || b.threads < 1) throw UsageError("bad verify-cost arguments");
  llama_model* model = load_cpu_model(a.positional[0]);
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  const int n_batch = std::max(c, max_k + 1);
  llama_context* ctx = bench_context(model, b, uint32_t(c + max_k + 16), uint32_t(n_batch), 1);
  llama_batch batch = llama_batch_init(n_batch, 0, 1);
  std::vector<llama_token> prompt(static_cast<size_t>(c)), draft(static_cast<size_t>(max_k + 1));
  std::vector<int> pos(static_cast<size_t>(n_batch));
  for (int i = 0; i < c; ++i) prompt[size_t(i)] = bench_token(i, n_vocab);
  for (int i = 0; i <= max_k; ++i) draft[size_t(i)] = bench_token(c + i, n_vocab);
  for (int i = 0; i < n_batch; ++i) pos[size_t(i)] = i;
  decode_rows(ctx, batch, c, prompt, std::vector<int>(size_t(c), 0), pos, false);
  for (int i = 0; i <= max_k; ++i) pos[size_t(i)] = c + i;
  nlohmann::json ms = nlohmann::json::array();
  for (int k = 0; k <= max_k; ++k) ms.push_back(nlohmann::json::array());
  const std::vector<int> seq0(size_t(max_k + 1), 0);
  for (int rep = -1; rep < b.reps; ++rep) {
    for (int k = 0; k <= max_k; ++k) {
      const auto t0 = Clock::now();
      for (int s = 0; s < steps; ++s) {
        llama_memory_seq_rm(llama_get_memory(ctx), 0, c, -1);  // positions must follow the sequence's last
        decode_rows(ctx, batch, k + 1, draft, seq0, pos, true);
      }
      if (rep >= 0) ms[size_t(k)].push_back(1e3 * seconds_since(t0) / steps);
    }
  }
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  std::cout << nlohmann::json{{"ms", ms}}.dump() << "\n";
  return 0;
}

// ---------------------------------------------------------------------------
// memory

// VmRSS and VmHWM of this process (bytes), from /proc/self/status.
std::pair<int64_t, int64_t> resident_bytes() {
  std::ifstream in("/proc/self/status");
  int64_t rss = -1, hwm = -1;
  for (std::string line; std::getline(in, line);) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %lld kB", &kib) == 1) rss = kib * 1024;
    if (std::sscanf(line.c_str(), "VmHWM: %lld kB", &kib) == 1) hwm = kib * 1024;
  }
  return {rss, hwm};
}

// memory MODEL --ctx-size C --parallel P [--fill T] [--threads N]
// [--cache-type-k T] [--cache-type-v T]: the resident memory of llama.cpp
// set up as `llama-server -c C -np P` sets itself up (common_params'
// defaults: one context of n_ctx C, n_seq_max P, a KV stream per sequence,
// n_batch 2048, n_ubatch 512, flash attention auto, the model mmapped, one
// warm-up decode), after T prompt tokens in each of the P sequences (in
// batches of 512). The prebuilt package ships the library, not the
// llama-server binary; the server's own bookkeeping (slots, HTTP) is left
// out. JSON {"rss_bytes", "hwm_bytes", "n_ctx", "n_seq", "fill"}.
int cmd_memory(const Args& a) {
  a.allow({"--ctx-size", "--parallel", "--fill", "--threads", "--cache-type-k", "--cache-type-v", "--verbose"});
  if (a.positional.size() != 1 || !a.has("--ctx-size") || !a.has("--parallel"))
    throw UsageError("memory MODEL.gguf --ctx-size C --parallel P [--fill T] [--threads N]");
  const int n_ctx = int(parse_int(*a.get("--ctx-size"), "--ctx-size"));
  const int n_par = int(parse_int(*a.get("--parallel"), "--parallel"));
  const int fill = int(parse_int(a.get("--fill").value_or("0"), "--fill"));
  const int threads = int(parse_int(a.get("--threads").value_or("2"), "--threads"));
  if (n_ctx < 1 || n_par < 1 || fill < 0 || threads < 1) throw UsageError("bad --ctx-size, --parallel, --fill or --threads");
  if (int64_t(fill) + 1 > n_ctx / n_par)
    fail("--fill " + std::to_string(fill) + " does not fit a sequence's share of the context (" +
         std::to_string(n_ctx / n_par) + ")");
  load_backends();
  llama_log_set(log_callback, nullptr);
  llama_model* model = llama_model_load_from_file(a.positional[0].c_str(), llama_model_default_params());
  if (!model) fail("could not load model " + a.positional[0]);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = uint32_t(n_ctx);
  cp.n_batch = 2048;
  cp.n_ubatch = 512;
  cp.n_seq_max = uint32_t(n_par);
  cp.n_threads = cp.n_threads_batch = threads;
  if (auto t = a.get("--cache-type-k")) cp.type_k = ggml_type_from_name(*t);
  if (auto t = a.get("--cache-type-v")) cp.type_v = ggml_type_from_name(*t);
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) fail("could not create a context");
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  llama_batch batch = llama_batch_init(512, 0, 1);
  decode_rows(ctx, batch, 1, {bench_token(0, n_vocab)}, {0}, {0}, true);  // the warm-up
  llama_memory_clear(llama_get_memory(ctx), true);
  for (int s = 0; s < n_par; ++s)
    for (int done = 0; done < fill;) {
      const int n = std::min(512, fill - done);
      std::vector<llama_token> tokens(static_cast<size_t>(n), 0);
      std::vector<int> pos(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        tokens[size_t(i)] = bench_token(int64_t(s) * fill + done + i, n_vocab);
        pos[size_t(i)] = done + i;
      }
      decode_rows(ctx, batch, n, tokens, std::vector<int>(size_t(n), s), pos, false);
      done += n;
    }
  const auto [rss, hwm] = resident_bytes();
  nlohmann::json out = {{"rss_bytes", rss}, {"hwm_bytes", hwm}, {"n_ctx", n_ctx}, {"n_seq", n_par}, {"fill", fill}};
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  std::cout << out.dump() << "\n";
  return 0;
}

// ---------------------------------------------------------------------------
// type-traits

int cmd_type_traits(const Args& a) {
  a.allow({"--verbose"});
  if (!a.positional.empty()) throw UsageError("type-traits takes no arguments");
  nlohmann::json types = nlohmann::json::array();
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const auto* tr = ggml_get_type_traits(static_cast<ggml_type>(t));
    if (tr->blck_size == 0) continue;  // a removed type number
    types.push_back({{"id", t},
                     {"name", tr->type_name},
                     {"blck_size", tr->blck_size},
                     {"type_size", tr->type_size},
                     {"is_quantized", tr->is_quantized}});
  }
  nlohmann::json out;
  out["type_count"] = static_cast<int>(GGML_TYPE_COUNT);
  out["types"] = std::move(types);
  std::cout << out.dump(1) << "\n";
  return 0;
}

// ---------------------------------------------------------------------------
// mxfp4

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("could not read " + path);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (raw.size() % sizeof(float) != 0) fail(path + " is not a whole number of f32 values");
  std::vector<float> v(raw.size() / sizeof(float));
  std::memcpy(v.data(), raw.data(), raw.size());
  return v;
}

void write_bytes(const std::string& path, const void* data, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!out) fail("could not write " + path);
}

// y = W x on the reference's CPU backend (ggml_mul_mat: x converted to the
// weight type's vec_dot_type, then its vec_dot per output), W [rows][cols]
// stored as `type`, x [tokens][cols] f32; y [tokens][rows].
std::vector<float> ref_mul_mat(ggml_type type, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                               const std::vector<float>& x) {
  load_backends();
  const int64_t tokens = static_cast<int64_t>(x.size()) / cols;
  ggml_backend_t cpu = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, nullptr);
  if (!cpu) fail("no CPU backend");
  ggml_init_params ip{ggml_tensor_overhead() * 8 + ggml_graph_overhead(), nullptr, /*no_alloc=*/true};
  ggml_context* ctx = ggml_init(ip);
  ggml_tensor* tw = ggml_new_tensor_2d(ctx, type, cols, rows);
  ggml_tensor* tx = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cols, tokens);
  ggml_tensor* ty = ggml_mul_mat(ctx, tw, tx);
  ggml_cgraph* gf = ggml_new_graph(ctx);
  ggml_build_forward_expand(gf, ty);
  ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, cpu);
  if (!buf) fail("could not allocate the mul_mat tensors");
  if (w.size() != ggml_nbytes(tw)) fail("weight size does not match its shape");
  ggml_backend_tensor_set(tw, w.data(), 0, w.size());
  ggml_backend_tensor_set(tx, x.data(), 0, x.size() * sizeof(float));
  if (ggml_backend_graph_compute(cpu, gf) != GGML_STATUS_SUCCESS) fail("mul_mat failed");
  std::vector<float> y(static_cast<size_t>(rows * tokens));
  ggml_backend_tensor_get(ty, y.data(), 0, y.size() * sizeof(float));
  ggml_backend_buffer_free(buf);
  ggml_free(ctx);
  ggml_backend_free(cpu);
  return y;
}

// mxfp4 IN.f32 OUT_DIR --cols C [--x X.f32]: IN's values as rows of C,
// quantized by the reference (ggml_quantize_chunk, i.e.
// quantize_row_mxfp4_ref) to OUT_DIR/blocks.bin; those blocks through
// ggml's to_float to OUT_DIR/dequant.f32; with --x (tokens of C values),
// the reference's mul_mat of the blocks and x to OUT_DIR/matmul.f32.
int cmd_mxfp4(const Args& a) {
  a.allow({"--cols", "--x", "--verbose"});
  if (a.positional.size() != 2 || !a.has("--cols")) throw UsageError("mxfp4 IN.f32 OUT_DIR --cols C [--x X.f32]");
  llama_log_set(log_callback, nullptr);
  const int64_t cols = parse_int(*a.get("--cols"), "--cols");
  const std::vector<float> in = read_floats(a.positional[0]);
  if (cols <= 0 || cols % ggml_blck_size(GGML_TYPE_MXFP4) != 0 || static_cast<int64_t>(in.size()) % cols != 0)
    fail("--cols must be a positive multiple of 32 dividing the value count");
  const int64_t rows = static_cast<int64_t>(in.size()) / cols;
  std::vector<uint8_t> blocks(ggml_row_size(GGML_TYPE_MXFP4, cols) * static_cast<size_t>(rows));
  const size_t written = ggml_quantize_chunk(GGML_TYPE_MXFP4, in.data(), blocks.data(), 0, rows, cols, nullptr);
  if (written != blocks.size()) fail("ggml_quantize_chunk wrote an unexpected size");
  const std::string dir = a.positional[1];
  write_bytes(dir + "/blocks.bin", blocks.data(), blocks.size());
  std::vector<float> deq(in.size());
  ggml_get_type_traits(GGML_TYPE_MXFP4)->to_float(blocks.data(), deq.data(), static_cast<int64_t>(deq.size()));
  write_floats(dir + "/dequant.f32", deq);
  if (const auto xpath = a.get("--x")) {
    const std::vector<float> x = read_floats(*xpath);
    if (x.empty() || static_cast<int64_t>(x.size()) % cols != 0) fail("--x must hold whole tokens of --cols values");
    write_floats(dir + "/matmul.f32", ref_mul_mat(GGML_TYPE_MXFP4, blocks, rows, cols, x));
  }
  return 0;
}

void usage() {
  std::cerr << "usage:\n"
               "  vtc-ref logits MODEL.gguf --tokens 1,2,3 [--n-predict N] [--threads N] [--no-repack] [--ubatch N] [--dump DIR] [--dump-at P]\n"
               "                 [--logits-file F]\n"
               "  vtc-ref quantize IN.gguf OUT.gguf TYPE [--pure] [--threads N]\n"
               "          [--token-embedding-type T] [--output-tensor-type T]\n"
               "  vtc-ref tokenize VOCAB.gguf [--no-special] [--no-add-special] < text\n"
               "  vtc-ref detokenize VOCAB.gguf [--no-special] < ids\n"
               "  vtc-ref dequant FILE.gguf TENSOR_NAME OUT.f32\n"
               "  vtc-ref dequant FILE.gguf --all OUT_DIR\n"
               "  vtc-ref type-traits\n"
               "  vtc-ref mxfp4 IN.f32 OUT_DIR --cols C [--x X.f32]\n"
               "  vtc-ref gguf-dump FILE.gguf\n"
               "  vtc-ref bench MODEL.gguf [--pp N] [--tg N] [--reps N] [--threads N]\n"
               "          [--batch-rows B] [--batch-context C] [--batch-steps K]\n"
               "  vtc-ref verify-cost MODEL.gguf --max-k K [--context C] [--steps S] [--reps R] [--threads N]\n"
               "  vtc-ref memory MODEL.gguf --ctx-size C --parallel P [--fill T] [--threads N]\n"
               "  vtc-ref chat-template TEMPLATE [--no-add-assistant] < messages.json\n"
               "  vtc-ref embeddings MODEL.gguf [--pooling none|mean|cls|last] [--threads N] < inputs.json\n"
               "add --verbose to see the library's log\n";
}

}  // namespace

// ---------------------------------------------------------------------------
// grammar: a grammar-constrained greedy run through the reference's own
// grammar sampler (llama_sampler_init_grammar, then greedy), for vtc's
// serve/grammar matcher to be compared with.
//
//   vtc-ref grammar MODEL.gguf GRAMMAR.gbnf --tokens 1,2,3 --n-predict N
//
// Prints {"tokens": [...]}: the generated ids, the end-of-generation token
// included when it was picked (the run stops there).

int cmd_grammar(const Args& a) {
  a.allow({"--tokens", "--n-predict", "--threads", "--verbose"});
  if (a.positional.size() != 2) throw UsageError("grammar MODEL.gguf GRAMMAR.gbnf --tokens 1,2,3 --n-predict N");
  std::ifstream gin(a.positional[1], std::ios::binary);
  if (!gin) fail("cannot read " + a.positional[1]);
  const std::string grammar((std::istreambuf_iterator<char>(gin)), std::istreambuf_iterator<char>());
  std::vector<llama_token> tokens;
  {
    std::stringstream ss(a.get("--tokens").value_or(""));
    std::string item;
    while (std::getline(ss, item, ',')) tokens.push_back(static_cast<llama_token>(parse_int(item, "token")));
  }
  if (tokens.empty()) throw UsageError("grammar needs --tokens");
  const int n_predict = static_cast<int>(parse_int(a.get("--n-predict").value_or("32"), "--n-predict"));
  const int threads = static_cast<int>(parse_int(a.get("--threads").value_or(kOracleThreads), "--threads"));

  load_backends();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(a.positional[0].c_str(), mp);
  if (!model) fail("could not load model " + a.positional[0]);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(tokens.size() + static_cast<size_t>(n_predict) + 16);
  cp.n_batch = static_cast<uint32_t>(tokens.size());
  cp.n_ubatch = cp.n_batch;
  cp.n_seq_max = 1;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) fail("could not create a context");
  llama_sampler* chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
  llama_sampler* g = llama_sampler_init_grammar(vocab, grammar.c_str(), "root");
  if (!g) fail("the reference refused the grammar");
  llama_sampler_chain_add(chain, g);
  llama_sampler_chain_add(chain, llama_sampler_init_greedy());

  llama_batch batch = llama_batch_get_one(tokens.data(), static_cast<int32_t>(tokens.size()));
  if (llama_decode(ctx, batch) != 0) fail("llama_decode failed on the prompt");
  std::vector<llama_token> out;
  for (int k = 0; k < n_predict; ++k) {
    llama_token next = llama_sampler_sample(chain, ctx, -1);
    out.push_back(next);
    if (llama_vocab_is_eog(vocab, next)) break;
    llama_batch one = llama_batch_get_one(&next, 1);
    if (llama_decode(ctx, one) != 0) fail("llama_decode failed at step " + std::to_string(k));
  }
  std::cout << nlohmann::json{{"tokens", out}}.dump() << "\n";
  llama_sampler_free(chain);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}

// ---------------------------------------------------------------------------
// embeddings: the reference's embeddings, as llama-server computes them
// before normalisation (llama_context_params.embeddings, the pooling given).
//
//   vtc-ref embeddings MODEL.gguf [--pooling none|mean|cls|last] < inputs.json
//
// Without --pooling the context takes the file's default (<arch>.pooling_type,
// else none), printed as "pooling" (0 none, 1 mean, 2 cls, 3 last).
// inputs.json: a JSON array whose items are strings (tokenized as
// llama-server tokenizes an embeddings input: special tokens added and
// parsed) or arrays of token ids. Each input is decoded alone, in one batch
// and one ubatch, as sequence 0 of a cleared context. Prints
// {"n_embd": D, "tokens": [[ids]...], "embeddings": [...]}: per input the
// pooled vector (llama_get_embeddings_seq), or with pooling none one vector
// per token (llama_get_embeddings_ith).

int cmd_embeddings(const Args& a) {
  a.allow({"--pooling", "--threads", "--verbose"});
  if (a.positional.size() != 1) throw UsageError("embeddings MODEL.gguf [--pooling none|mean|cls|last] < inputs.json");
  const std::string pooling = a.get("--pooling").value_or("");
  enum llama_pooling_type type;
  if (pooling == "none") type = LLAMA_POOLING_TYPE_NONE;
  else if (pooling == "mean") type = LLAMA_POOLING_TYPE_MEAN;
  else if (pooling == "cls") type = LLAMA_POOLING_TYPE_CLS;
  else if (pooling == "last") type = LLAMA_POOLING_TYPE_LAST;
  else if (pooling.empty()) type = LLAMA_POOLING_TYPE_UNSPECIFIED;  // the file's, as llama_context picks it
  else throw UsageError("--pooling must be none, mean, cls or last");
  const int threads = static_cast<int>(parse_int(a.get("--threads").value_or(kOracleThreads), "--threads"));
  const nlohmann::json inputs = nlohmann::json::parse(std::cin);
  if (!inputs.is_array() || inputs.empty()) fail("inputs.json must be a non-empty array");

  load_backends();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(a.positional[0].c_str(), mp);
  if (!model) fail("could not load model " + a.positional[0]);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::vector<std::vector<llama_token>> token_lists;
  size_t longest = 1;
  for (const auto& in : inputs) {
    std::vector<llama_token> ids;
    if (in.is_string()) {
      const std::string text = in.get<std::string>();
      ids.resize(text.size() + 16);
      const int32_t n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                                       static_cast<int32_t>(ids.size()), true, true);
      if (n < 0) fail("llama_tokenize failed");
      ids.resize(static_cast<size_t>(n));
    } else {
      ids = in.get<std::vector<llama_token>>();
    }
    if (ids.empty()) fail("an input has no tokens");
    longest = std::max(longest, ids.size());
    token_lists.push_back(std::move(ids));
  }
  const int n_embd = llama_model_n_embd(model);
  llama_context_params cp = llama_context_default_params();
  cp.embeddings = true;
  cp.pooling_type = type;
  cp.n_ctx = static_cast<uint32_t>(std::max<size_t>(longest, 16));
  cp.n_batch = static_cast<uint32_t>(longest);
  cp.n_ubatch = cp.n_batch;  // one ubatch: a non-causal encoder sees the whole input
  cp.n_seq_max = 1;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) fail("could not create a context");
  type = llama_pooling_type(ctx);
  nlohmann::json embeddings = nlohmann::json::array();
  for (const auto& ids : token_lists) {
    llama_memory_clear(llama_get_memory(ctx), true);
    const int n = static_cast<int>(ids.size());
    llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
      batch.token[i] = ids[static_cast<size_t>(i)];
      batch.pos[i] = i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = 1;  // an output row for every token, as llama-server asks for embeddings
    }
    batch.n_tokens = n;
    if (llama_decode(ctx, batch) != 0) fail("llama_decode failed");
    if (type == LLAMA_POOLING_TYPE_NONE) {
      nlohmann::json rows = nlohmann::json::array();
      for (int i = 0; i < n; ++i) {
        const float* e = llama_get_embeddings_ith(ctx, i);
        if (!e) fail("no embedding for token " + std::to_string(i));
        rows.push_back(std::vector<float>(e, e + n_embd));
      }
      embeddings.push_back(std::move(rows));
    } else {
      const float* e = llama_get_embeddings_seq(ctx, 0);
      if (!e) fail("no pooled embedding");
      embeddings.push_back(std::vector<float>(e, e + n_embd));
    }
    llama_batch_free(batch);
  }
  std::cout << nlohmann::json{{"n_embd", n_embd}, {"pooling", int(type)}, {"tokens", token_lists}, {"embeddings", embeddings}}.dump()
            << "\n";
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    usage();
    return 2;
  }
  const std::string cmd = argv[1];
  try {
    const Args a = Args::parse(argc, argv, 2,
                               {"--tokens", "--n-predict", "--threads", "--token-embedding-type", "--dump",
                                "--output-tensor-type", "--all", "--pp", "--tg", "--reps", "--ubatch",
                                "--batch-rows", "--batch-context", "--batch-steps", "--cols", "--x", "--logits-file",
                                "--pooling", "--cache-type-k", "--cache-type-v", "--prompt-batch", "--dump-at", "--ctx-size",
                                "--parallel", "--fill", "--max-k", "--context", "--steps"});
    g_verbose = a.has("--verbose");
    if (cmd == "logits") return cmd_logits(a);
    if (cmd == "quantize") return cmd_quantize(a);
    if (cmd == "tokenize") return cmd_tokenize(a);
    if (cmd == "detokenize") return cmd_detokenize(a);
    if (cmd == "dequant") return cmd_dequant(a);
    if (cmd == "type-traits") return cmd_type_traits(a);
    if (cmd == "mxfp4") return cmd_mxfp4(a);
    if (cmd == "gguf-dump") return cmd_gguf_dump(a);
    if (cmd == "chat-template") return cmd_chat_template(a);
    if (cmd == "bench") return cmd_bench(a);
    if (cmd == "verify-cost") return cmd_verify_cost(a);
    if (cmd == "memory") return cmd_memory(a);
    if (cmd == "grammar") return cmd_grammar(a);
    if (cmd == "embeddings") return cmd_embeddings(a);
    if (cmd == "-h" || cmd == "--help") {
      usage();
      return 0;
    }
    throw UsageError("unknown command '" + cmd + "'");
  } catch (const UsageError& e) {
    std::cerr << "vtc-ref: " << e.what() << "\n";
    usage();
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "vtc-ref " << cmd << ": " << e.what() << "\n";
    return 1;
  }
}
