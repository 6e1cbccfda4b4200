#include "serve/engine/speculative/verify.h"

#include "support/mutation.h"

namespace vtc::serve {

void SpecSequence::start(int32_t n_past, int32_t first) {
  n_past_ = n_past;
  pending_.assign(1, first);
  draft_.clear();
  checkpoint_.reset();
  checkpoint_at_ = -1;
}

SeqChunk SpecSequence::chunk(int32_t slot, std::span<const int32_t> draft, StateStore& states) {
  draft_.assign(draft.begin(), draft.end());
  chunk_ = pending_;
  chunk_.insert(chunk_.end(), draft_.begin(), draft_.end());
  if (!draft_.empty() && states.carries_recurrent_state() && checkpoint_at_ != n_past_) {
    checkpoint_ = states.save_checkpoint(slot, std::move(checkpoint_));
    checkpoint_at_ = n_past_;
  }
  return {slot, chunk_, n_past_, int32_t(draft_.size() + 1), chunk_.size() > 1};
}

void SpecSequence::verified(int32_t slot, size_t accepted, int32_t next, StateStore& states, Session* session) {
  const size_t k = draft_.size();
  if (accepted < k && states.carries_recurrent_state()) {
    // The states ran the rejected rows: back to n_past, and the accepted
    // part runs again next step.
    if (!mutated(Mutation::SpecSkipStateRestore)) states.restore_checkpoint(slot, *checkpoint_);
    pending_.insert(pending_.end(), draft_.begin(), draft_.begin() + int64_t(accepted));
    pending_.push_back(next);
  } else {
    const bool keep_rejected = accepted < k && mutated(Mutation::SpecKeepRejectedRow);
    n_past_ += int32_t(pending_.size() + accepted) + (keep_rejected ? 1 : 0);
    pending_.assign(1, next);
    if (session && accepted < k) session->truncate(slot, n_past_);
  }
  draft_.clear();
}

}  // namespace vtc::serve
