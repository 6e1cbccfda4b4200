// The draft-model drafter: a smaller GGUF with the target's vocabulary, run
// by its own Session on the target's backend (its steps compiled by the
// same pipeline), proposes each draft token as its greedy argmax.
//
// Drafting is greedy, so a draft is a point mass q = [x]: the target's
// sample-and-compare (serve/engine/speculative/verify.h) is then exactly
// the rejection sampling of Leviathan et al. (accept x with probability
// min(1, p(x) / q(x)) = p(x); on rejection draw from norm(max(p - q, 0)),
// which is p without x).
//
// Per slot the drafter keeps the tokens its session has run. draft() takes
// the sequence's accepted tokens: the run tokens that disagree with them
// (drafts the target rejected) are rolled back (positions forgotten; for a
// draft model with recurrent state, its checkpoint restored and the
// accepted tokens after it run again), the new accepted tokens run in one
// chunk, and then one batched decode step per further draft token, for all
// sequences at once. Drafting stops where the draft's top probability falls
// below p_min (llama.cpp's rule) or at `max` tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/session.h"
#include "runtime/state/state_store.h"
#include "serve/engine/speculative/draft_policy.h"

namespace vtc {
class Tokenizer;
}

namespace vtc::serve {

class ModelDrafter {
 public:
  // Loads `path` with the target session's target, threads, context and
  // slots. Throws vtc::Error naming both files when the vocabularies differ.
  ModelDrafter(const std::string& path, const SessionOptions& options, const Session& target,
               const Tokenizer& target_tokenizer);
  ~ModelDrafter();

  struct Job {
    int32_t slot = 0;
    std::span<const int32_t> accepted;  // the sequence so far: prompt and output
    int32_t max = 0;
    float p_min = 0;
    int32_t min = 1;             // a shorter draft (cut below p_min) is dropped: see draft_and_account
    std::vector<int32_t> draft;  // out
  };
  void draft(std::span<Job> jobs);
  // The slot's sequence ended.
  void forget(int32_t slot);

  Session& session() { return *session_; }

 private:
  struct Slot {
    std::vector<int32_t> run;  // tokens whose states the draft session holds
    std::unique_ptr<SlotCheckpoint> checkpoint;
    size_t checkpoint_at = 0;
  };
  void roll_back(int32_t slot, Slot& s, size_t keep);
  void sync(std::span<Job> jobs, std::vector<float>& first_rows);

  std::unique_ptr<Session> session_;
  std::vector<Slot> slots_;
};

// The draft model's steps behind a job's draft: one per token, and one
// more when it stopped below p_min before `max` (that token was computed,
// then dropped).
inline int32_t draft_steps(const ModelDrafter::Job& job) {
  const int32_t n = int32_t(job.draft.size());
  return n + (n < job.max ? 1 : 0);
}

// One drafting round, as `vtc run` and the server both do it: runs the
// draft model on `jobs`, tells `policy` its steps and seconds (the draft
// cost in the adaptive length), and empties each draft shorter than its
// job's `min`, which counts as a failed draft of that job's record
// (records[i] belongs to jobs[i]): the policy backs off from a drafter
// that keeps giving nothing.
void draft_and_account(ModelDrafter& drafter, DraftPolicy& policy, std::span<ModelDrafter::Job> jobs,
                       std::span<DraftPolicy::Sequence* const> records);

}  // namespace vtc::serve
