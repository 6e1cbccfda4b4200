// vtc-chat-ref sample: the llama.cpp reference's sampler chain
// (common_sampler, as llama-server builds it) replayed over logits that
// vtc computed, as an oracle for vtc's host Sampler (runtime/sampler.h),
// `vtc run` and `vtc serve` (issue 41).
//
//   vtc-chat-ref sample VOCAB.gguf LOGITS [--temp T] [--top-k K] [--top-p P]
//       [--min-p P] [--repeat-last-n N] [--repeat-penalty R]
//       [--frequency-penalty F] [--presence-penalty P] [--seed S]
//       [--stop TEXT]... [-n N]
//
// LOGITS is what `vtc run --dump-logits LOGITS` writes: raw little-endian
// f32 rows of n_vocab, one per prompt position and then one per generated
// token (row P+i computed with generated[i] as input), and LOGITS.json
// ({"n_vocab", "rows", "prompt", "generated"}). Only the vocabulary of the
// GGUF is loaded (vocab_only).
//
// As llama-server: common_sampler_init(model, params) with the given
// temp, top_k, top_p, min_p, penalty_last_n, penalty_repeat, penalty_freq,
// penalty_present and seed (every other field its default, so the chain is
// penalties, dry, top-n-sigma, top-k, typical, top-p, min-p, xtc,
// temperature, dist; the disabled ones do nothing); every prompt id
// accepted with common_sampler_accept(smpl, id, false) (init_sampler);
// then per token: a llama_token_data_array over the row (ids in order,
// unsorted), common_sampler_get(smpl)'s chain applied (common_sampler_sample
// without grammar or reasoning budget), cur_p.data[cur_p.selected].id
// taken and accepted (is_generated = true). Its piece is
// common_token_to_piece(vocab, id, special = false) and the text follows
// process_token: appended, and, unless it ends in a cut UTF-8 character,
// searched for the stop strings (the full stop: text cut before the first
// match, generation ends); an end-of-generation token ends it too.
//
// Row P-1+i predicts token i only while the ids so far equal vtc's
// `generated`: at the first id that differs the replay ends
// ("diverged_at": i, that id last in "ids").
//
// Output, one JSON object on stdout: {"ids": [...], "text": "...",
// "text_end": [the text's byte length after each token, before the cut],
// "finish_reason": "stop"|"length", "stop_type": "eos"|"word"|"limit"|
// "rows" (the rows ran out)|"diverged", "stopping_word": "...",
// "diverged_at": i or -1, "seed": the seed in use}. Exit 0; bad arguments
// or unreadable files: exit 2.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.h"
#include "llama.h"
#include "sampling.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: vtc-chat-ref sample VOCAB.gguf LOGITS [--temp T] [--top-k K] [--top-p P] [--min-p P] "
               "[--repeat-last-n N] [--repeat-penalty R] [--frequency-penalty F] [--presence-penalty P] [--seed S] "
               "[--stop TEXT]... [-n N]\n");
  return 2;
}

// llama-server's validate_utf8: the length without a cut multi-byte
// character at the end.
size_t validate_utf8(const std::string& text) {
  const size_t len = text.size();
  for (size_t i = 1; i <= 4 && i <= len; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[len - i]);
    if ((c & 0xE0) == 0xC0) {
      if (i < 2) return len - i;
    } else if ((c & 0xF0) == 0xE0) {
      if (i < 3) return len - i;
    } else if ((c & 0xF8) == 0xF0) {
      if (i < 4) return len - i;
    }
  }
  return len;
}

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

}  // namespace

int cmd_sample(int argc, char** argv) {
  std::vector<std::string> pos;
  std::vector<std::string> stops;
  common_params_sampling params;  // llama-server's defaults for everything not given
  long long n_max = -1;
  try {
    for (int i = 0; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "--temp") params.temp = std::stof(value());
      else if (a == "--top-k") params.top_k = std::stoi(value());
      else if (a == "--top-p") params.top_p = std::stof(value());
      else if (a == "--min-p") params.min_p = std::stof(value());
      else if (a == "--repeat-last-n") params.penalty_last_n = std::stoi(value());
      else if (a == "--repeat-penalty") params.penalty_repeat = std::stof(value());
      else if (a == "--frequency-penalty") params.penalty_freq = std::stof(value());
      else if (a == "--presence-penalty") params.penalty_present = std::stof(value());
      else if (a == "--seed") params.seed = static_cast<uint32_t>(std::stoull(value()));
      else if (a == "--stop") stops.push_back(value());
      else if (a == "-n") n_max = std::stoll(value());
      else if (!a.empty() && a[0] == '-') throw std::invalid_argument("unknown option " + a);
      else pos.push_back(a);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vtc-chat-ref sample: %s\n", e.what());
    return usage();
  }
  if (pos.size() != 2) return usage();

  std::ifstream meta_in(pos[1] + ".json");
  if (!meta_in) {
    std::fprintf(stderr, "vtc-chat-ref sample: cannot read %s.json\n", pos[1].c_str());
    return 2;
  }
  const nlohmann::json meta = nlohmann::json::parse(meta_in);
  const size_t n_vocab = meta.at("n_vocab").get<size_t>();
  const size_t n_rows = meta.at("rows").get<size_t>();
  const std::vector<llama_token> prompt = meta.at("prompt").get<std::vector<llama_token>>();
  const std::vector<llama_token> generated = meta.at("generated").get<std::vector<llama_token>>();
  std::vector<float> logits(n_vocab * n_rows);
  {
    std::ifstream in(pos[1], std::ios::binary);
    in.read(reinterpret_cast<char*>(logits.data()), std::streamsize(logits.size() * sizeof(float)));
    if (!in || prompt.empty() || n_rows < prompt.size()) {
      std::fprintf(stderr, "vtc-chat-ref sample: %s: expected %zu rows of %zu f32 after a non-empty prompt\n",
                   pos[1].c_str(), n_rows, n_vocab);
      return 2;
    }
  }

  llama_log_set(quiet_log, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(pos[0].c_str(), mp);
  if (!model) {
    std::fprintf(stderr, "vtc-chat-ref sample: cannot load the vocabulary of %s\n", pos[0].c_str());
    return 2;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  if (size_t(llama_vocab_n_tokens(vocab)) != n_vocab) {
    std::fprintf(stderr, "vtc-chat-ref sample: the vocabulary has %d tokens, the logits %zu\n",
                 llama_vocab_n_tokens(vocab), n_vocab);
    return 2;
  }

  common_sampler* smpl = common_sampler_init(model, params);
  // init_sampler: every prompt token, not as generated.
  for (llama_token id : prompt) common_sampler_accept(smpl, id, false);

  nlohmann::json out;
  std::vector<llama_token> ids;
  std::vector<size_t> text_end;  // the text's length after each token, before a stop string cuts it
  std::string generated_text;
  size_t n_sent_text = 0;
  std::string stop_type = "rows", stopping_word;
  long long diverged_at = -1;
  std::vector<llama_token_data> cur(n_vocab);
  for (size_t i = 0;; ++i) {
    if (n_max >= 0 && (long long)i >= n_max) {
      stop_type = "limit";
      break;
    }
    const size_t row = prompt.size() - 1 + i;
    if (row >= n_rows) break;  // "rows"
    const float* l = logits.data() + row * n_vocab;
    for (size_t t = 0; t < n_vocab; ++t) cur[t] = llama_token_data{llama_token(t), l[t], 0.0f};
    llama_token_data_array cur_p = {cur.data(), cur.size(), -1, false};
    llama_sampler_apply(common_sampler_get(smpl), &cur_p);
    const llama_token id = cur_p.data[cur_p.selected].id;
    common_sampler_accept(smpl, id, true);
    ids.push_back(id);

    // process_token, non-streaming.
    const std::string piece = common_token_to_piece(vocab, id, /*special=*/false);
    generated_text += piece;
    text_end.push_back(generated_text.size());
    bool has_next = true;
    if (validate_utf8(generated_text) >= generated_text.size()) {
      size_t from = std::min(n_sent_text, generated_text.size());
      const std::string str_test = generated_text.substr(from);
      size_t stop_pos = std::string::npos;
      for (const std::string& word : stops) {
        const size_t tmp = word.size() + piece.size();
        const size_t from_pos = str_test.size() > tmp ? str_test.size() - tmp : 0;
        const size_t p = str_test.find(word, from_pos);
        if (p != std::string::npos && (stop_pos == std::string::npos || p < stop_pos)) {
          stop_type = "word";
          stopping_word = word;
          has_next = false;
          stop_pos = p;
        }
      }
      bool send = true;
      if (stop_pos != std::string::npos) {
        generated_text.erase(from + stop_pos);
        from = std::min(n_sent_text, generated_text.size());
      } else if (!llama_vocab_is_eog(vocab, id)) {
        // A partial match at the end is held back (matters only for streaming).
        for (const std::string& word : stops)
          if (string_find_partial_stop(str_test, word) != std::string::npos) send = false;
      }
      if (send) n_sent_text += generated_text.size() - from;
    }
    if (has_next && llama_vocab_is_eog(vocab, id)) {
      stop_type = "eos";
      has_next = false;
    }
    if (!has_next) break;
    if (i < generated.size() && id != generated[i]) {
      stop_type = "diverged";
      diverged_at = (long long)i;
      break;
    }
  }
  // An id that differs on the token that ended generation still diverged.
  if (diverged_at < 0 && !ids.empty() && ids.size() <= generated.size() && ids.back() != generated[ids.size() - 1])
    diverged_at = (long long)ids.size() - 1;

  out["ids"] = ids;
  out["text"] = generated_text;
  out["text_end"] = text_end;
  out["finish_reason"] = stop_type == "eos" || stop_type == "word" ? "stop" : "length";
  out["stop_type"] = stop_type;
  out["stopping_word"] = stopping_word;
  out["diverged_at"] = diverged_at;
  out["seed"] = common_sampler_get_seed(smpl);
  std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  common_sampler_free(smpl);
  llama_model_free(model);
  return 0;
}
