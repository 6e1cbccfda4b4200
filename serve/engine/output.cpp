#include "serve/engine/output.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

namespace vtc::serve {

std::string_view finish_name(Finish kind) {
  switch (kind) {
    case Finish::None: return "";
    case Finish::Stop: return "stop";
    case Finish::Length: return "length";
    case Finish::Cancelled: return "cancelled";
    case Finish::Error: return "error";
  }
  return "";
}

// --- TextStream -------------------------------------------------------------------
std::string TextStream::release_safe() {
  // The earliest stop string in the text ends it (llama-server's
  // find_stopping_strings); on a tie, the first listed.
  size_t stop_at = std::string::npos;
  for (const std::string& s : stop_) {
    if (s.empty()) continue;
    const size_t at = pending_.find(s);
    if (at < stop_at) stop_at = at, matched_ = s;
  }
  if (stop_at != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, stop_at);
    pending_.clear();
    return out;
  }
  // Hold the longest suffix that is a prefix of a stop string.
  size_t hold = 0;
  for (const std::string& s : stop_)
    for (size_t n = std::min(s.size() - (s.empty() ? 0 : 1), pending_.size()); n > hold; --n)
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string TextStream::push(int32_t id, bool stops_armed) {
  if (stopped_) return {};
  pending_ += decoder_.push(id);
  if (stops_armed) return release_safe();
  return std::exchange(pending_, std::string());
}

std::string TextStream::finish() {
  if (stopped_) return {};
  pending_ += decoder_.flush();
  std::string out = release_safe();
  if (!stopped_) out += pending_;
  pending_.clear();
  return out;
}

// --- Generation -------------------------------------------------------------------
Generation::Generation(const GenerationParams& params, const Tokenizer& tok)
    : params_(params), tok_(tok), sampler_(params.sampling), text_(tok, params.stop, params.keep_special_text) {
  for (int32_t t : params.prompt) sampler_.accept(t);
}

int32_t Generation::draw(std::span<const float> row) {
  const GenerationParams& p = params_;
  const bool ban_ends = generated_ < p.min_tokens;
  if (p.logit_bias.empty() && !p.constraint && !ban_ends) return sampler_.sample(row);
  work_.assign(row.begin(), row.end());
  const float minus_inf = -std::numeric_limits<float>::infinity();
  for (const auto& [id, bias] : p.logit_bias) work_[size_t(id)] += bias;
  if (ban_ends) {
    for (int32_t id : p.stop_token_ids) work_[size_t(id)] = minus_inf;
    if (!p.ignore_eos)
      for (size_t id = 0; id < work_.size(); ++id)
        if (tok_.is_eog(int32_t(id))) work_[id] = minus_inf;
  }
  if (p.constraint) p.constraint->mask(work_);
  return sampler_.sample(work_);
}

bool Generation::accept(int32_t id) {
  sampler_.accept(id);
  return !params_.constraint || params_.constraint->accept(id);
}

namespace {
// The token's log-softmax over the model's row and the `k` most likely
// alternatives (ties: lowest id first).
void add_logprobs(TokenEvent& ev, std::span<const float> row, size_t k) {
  const float mx = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float x : row) sum += std::exp(double(x - mx));
  const float lse = mx + float(std::log(sum));
  ev.logprob = row[size_t(ev.id)] - lse;
  std::vector<int32_t> idx(row.size());
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min(k, idx.size());
  std::partial_sort(idx.begin(), idx.begin() + ptrdiff_t(k), idx.end(), [&](int32_t x, int32_t y) {
    return row[size_t(x)] > row[size_t(y)] || (row[size_t(x)] == row[size_t(y)] && x < y);
  });
  for (size_t i = 0; i < k; ++i) ev.top.emplace_back(idx[i], row[size_t(idx[i])] - lse);
}
}  // namespace

TokenEvent Generation::emit(int32_t id, std::span<const float> row, int64_t next_position, int64_t n_ctx,
                            FinishReason& finish) {
  const GenerationParams& p = params_;
  TokenEvent ev;
  ev.id = id;
  if (p.top_logprobs >= 0 && !row.empty()) add_logprobs(ev, row, size_t(p.top_logprobs));
  const int32_t n = ++generated_;
  const bool armed = n > p.min_tokens;
  const bool eog = tok_.is_eog(id) && !p.ignore_eos;
  const bool stop_id = armed && std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), id) != p.stop_token_ids.end();
  ev.text = eog || stop_id ? std::string() : text_.push(id, armed);
  finish = {};
  if (eog || stop_id || text_.stopped() || (p.constraint && p.constraint->finished())) {
    finish.kind = Finish::Stop;
    finish.eog = eog;
    finish.matched_stop = text_.matched_stop();
  } else if (n >= p.max_tokens || next_position + 1 >= n_ctx) {
    finish.kind = Finish::Length;
    finish.context_full = n < p.max_tokens;
  }
  if (finish.kind != Finish::None) ev.text += text_.finish();  // releases held text (nothing after a stop string)
  return ev;
}

}  // namespace vtc::serve
