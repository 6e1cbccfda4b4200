#include "serve/engine/speculative/model_drafter.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "frontends/gguf/tokenizer/tokenizer.h"
#include "support/error.h"

namespace vtc::serve {
namespace {

// The draft may only propose ids that mean the same text to the target.
void check_same_vocabulary(const Session& draft, const Tokenizer& draft_tok, const Session& target,
                           const Tokenizer& target_tok) {
  const std::string& d = draft.file().path();
  const std::string& t = target.file().path();
  if (draft.n_vocab() != target.n_vocab() || draft_tok.vocab_size() != target_tok.vocab_size())
    throw Error(fmt::format("draft model {} has a vocabulary of {} tokens, the target {} one of {}: speculative "
                            "decoding needs the same vocabulary",
                            d, draft_tok.vocab_size(), t, target_tok.vocab_size()));
  for (size_t id = 0; id < target_tok.vocab_size(); ++id)
    if (draft_tok.token_text(int32_t(id)) != target_tok.token_text(int32_t(id)))
      throw Error(fmt::format("draft model {} and target {} differ at token {} ({:?} against {:?}): speculative "
                              "decoding needs the same vocabulary",
                              d, t, id, draft_tok.token_text(int32_t(id)), target_tok.token_text(int32_t(id))));
}

// The argmax (lowest id on ties) and its softmax probability.
std::pair<int32_t, float> top_token(const float* row, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = int32_t(i);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(row[i]) - row[best]);
  return {best, float(1.0 / sum)};
}

}  // namespace

ModelDrafter::ModelDrafter(const std::string& path, const SessionOptions& options, const Session& target,
                           const Tokenizer& target_tokenizer) {
  SessionOptions o = options;
  o.n_ctx = target.n_ctx();
  o.embeddings = false;
  session_ = std::make_unique<Session>(path, o);
  session_->require_text_generation("the draft model of --spec draft");
  check_same_vocabulary(*session_, Tokenizer::from_gguf(session_->file()), target, target_tokenizer);
  slots_.resize(size_t(std::max(o.n_slots, 1)));
}

ModelDrafter::~ModelDrafter() = default;

void ModelDrafter::forget(int32_t slot) {
  Slot& s = slots_.at(size_t(slot));
  s.run.clear();
  s.checkpoint.reset();
  s.checkpoint_at = 0;
  session_->reset(slot);
}

// Keeps the first `keep` run tokens' states and forgets the rest.
void ModelDrafter::roll_back(int32_t slot, Slot& s, size_t keep) {
  if (keep >= s.run.size()) return;
  if (session_->states().carries_recurrent_state()) {
    if (s.checkpoint && s.checkpoint_at <= keep) {
      session_->states().restore_checkpoint(slot, *s.checkpoint);
      keep = s.checkpoint_at;
    } else {
      session_->reset(slot);
      s.checkpoint.reset();
      keep = 0;
    }
  }
  s.run.resize(keep);
  session_->truncate(slot, int64_t(keep));
}

// Runs every job's accepted tokens the draft session has not run, in steps
// under the token bound; the last row of each becomes its first draft row.
void ModelDrafter::sync(std::span<Job> jobs, std::vector<float>& first_rows) {
  const int64_t V = session_->n_vocab();
  first_rows.assign(size_t(V) * jobs.size(), 0.0f);
  for (Job& j : jobs) {
    Slot& s = slots_.at(size_t(j.slot));
    size_t common = 0;
    while (common < s.run.size() && common < j.accepted.size() && s.run[common] == j.accepted[common]) ++common;
    // At least the last accepted token runs, for its logits.
    roll_back(j.slot, s, std::min(common, j.accepted.size() - 1));
  }
  std::vector<size_t> left(jobs.size());
  for (;;) {
    std::vector<SeqChunk> chunks;
    std::vector<size_t> owner;
    int64_t budget = session_->max_step_tokens();
    for (size_t i = 0; i < jobs.size() && budget > 0; ++i) {
      Slot& s = slots_[size_t(jobs[i].slot)];
      const size_t from = s.run.size(), n = std::min<size_t>(jobs[i].accepted.size() - from, size_t(budget));
      if (n == 0) continue;
      const bool ends = from + n == jobs[i].accepted.size();
      chunks.push_back({jobs[i].slot, jobs[i].accepted.subspan(from, n), int32_t(from), ends ? 1 : 0});
      owner.push_back(i);
      budget -= int64_t(n);
    }
    if (chunks.empty()) return;
    const HostTensor logits = session_->step(chunks);
    int64_t row = 0;
    for (size_t c = 0; c < chunks.size(); ++c) {
      Job& j = jobs[owner[c]];
      Slot& s = slots_[size_t(j.slot)];
      s.run.insert(s.run.end(), chunks[c].tokens.begin(), chunks[c].tokens.end());
      if (chunks[c].logit_rows == 0) continue;
      std::copy_n(logits.f32() + row++ * V, V, first_rows.begin() + int64_t(owner[c]) * V);
      // A recurrent draft model rolls back to here next time.
      if (session_->states().carries_recurrent_state()) {
        s.checkpoint = session_->states().save_checkpoint(j.slot, std::move(s.checkpoint));
        s.checkpoint_at = s.run.size();
      }
    }
  }
}

void ModelDrafter::draft(std::span<Job> jobs) {
  const int64_t V = session_->n_vocab();
  for (Job& j : jobs) {
    j.draft.clear();
    if (j.accepted.empty()) throw Error("draft model: a sequence with no tokens");
  }
  std::vector<float> rows;
  sync(jobs, rows);
  std::vector<size_t> going;  // jobs still drafting, each with its last row in `rows`
  for (size_t i = 0; i < jobs.size(); ++i) going.push_back(i);
  std::vector<int32_t> next(jobs.size());
  while (!going.empty()) {
    std::vector<size_t> still;
    for (size_t g = 0; g < going.size(); ++g) {
      Job& j = jobs[going[g]];
      const auto [id, p] = top_token(rows.data() + int64_t(g) * V, V);
      if (int32_t(j.draft.size()) >= j.max || p < j.p_min) continue;
      j.draft.push_back(id);
      const Slot& s = slots_[size_t(j.slot)];
      if (int32_t(j.draft.size()) < j.max && s.run.size() + 1 < size_t(session_->n_ctx())) still.push_back(going[g]);
    }
    going = std::move(still);
    if (going.empty()) break;
    std::vector<SeqChunk> chunks;
    for (size_t i : going) {
      Slot& s = slots_[size_t(jobs[i].slot)];
      next[i] = jobs[i].draft.back();
      chunks.push_back({jobs[i].slot, {&next[i], 1}, int32_t(s.run.size()), 1});
      s.run.push_back(next[i]);
    }
    const HostTensor logits = session_->step(chunks);
    rows.assign(logits.f32(), logits.f32() + logits.numel());
  }
}

void draft_and_account(ModelDrafter& drafter, DraftPolicy& policy, std::span<ModelDrafter::Job> jobs,
                       std::span<DraftPolicy::Sequence* const> records) {
  if (jobs.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  drafter.draft(jobs);
  int32_t steps = 0;
  for (const ModelDrafter::Job& job : jobs) steps += draft_steps(job);
  policy.drafted(steps, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  for (size_t i = 0; i < jobs.size(); ++i)
    if (int32_t(jobs[i].draft.size()) < std::max(jobs[i].min, 1)) {
      jobs[i].draft.clear();
      policy.verified(*records[i], 1, 0);
    }
}

}  // namespace vtc::serve
