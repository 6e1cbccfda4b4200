// One sequence's speculation on the target session: the verify step's
// chunk, acceptance, and the rollback of rejected rows.
//
// The verify step is the @prefill step (the same IR, the same lowering and
// backends; `--dump-ir` shows it) with a chunk of the accepted tokens that
// have not run yet (`pending`, at least the last sampled token) followed by
// the k draft tokens, returning the logits of the last pending row and of
// every draft row (SeqChunk::logit_rows = k + 1). Other sequences' decode
// rows and prefill chunks share the step.
//
// Acceptance (the caller's loop over the k + 1 rows, verify_rows()): row i
// draws a token with the sequence's own sampler chain (greedy, or the full
// chain with penalties, each draw seeing the tokens accepted before it);
// it is kept, and the loop goes on while it equals draft token i. With
// greedy sampling the output is therefore the tokens plain decoding picks;
// with sampling each position gets one draw from the target's distribution
// p, which is the rejection sampling of Leviathan et al. for a drafter that
// proposes one token (q a point mass: accept x with probability p(x), on
// rejection a draw from p without x). Both drafters propose that way.
//
// Rollback after a draft token is rejected (accepted a of k):
//   - paged KV: the sequence continues at the position after the a
//     accepted drafts; the rejected rows' positions are overwritten by the
//     next step before any row can read them (attention is causal), and
//     `vtc run` gives pages wholly past them back (Session::truncate).
//   - recurrent states (conv rings, delta-rule and scan matrices, the
//     n-gram history): before a verify step with a draft the slot's states
//     are checkpointed (StateStore::save_checkpoint, device to device on
//     CUDA); after a rejection they are restored and the a accepted drafts
//     and the new token become pending. The next step runs them again
//     without a draft (may_draft() is false), as a plain decode step that
//     recomputes: its last row gives the next token, and the states are
//     committed, so the following step drafts from a fresh checkpoint
//     (its rows take decode's bits too: SeqChunk::rows_as_decode). A
//     rejection thus costs one undrafted step, and a chunk never holds more
//     than k + 2 tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/session.h"
#include "runtime/state/state_store.h"

namespace vtc::serve {

class SpecSequence {
 public:
  // Decoding starts after a prompt of n_past tokens with `first` sampled.
  void start(int32_t n_past, int32_t first);
  int32_t n_past() const { return n_past_; }
  const std::vector<int32_t>& pending() const { return pending_; }
  // Positions this step writes: pending plus the draft.
  int32_t positions_after(size_t draft) const { return n_past_ + int32_t(pending_.size() + draft); }
  // The input position of the chunk's logits row i (the last pending
  // token's is row 0): the position the `sample` op draws that row's token
  // with, as a decode step fed that token would.
  int32_t row_position(size_t i) const { return n_past_ + int32_t(pending_.size()) - 1 + int32_t(i); }
  // false while rolled-back tokens wait to be run again (see above).
  bool may_draft() const { return pending_.size() == 1; }

  // This step's chunk: pending, then `draft` (kept until verified()). On a
  // model with recurrent state and a non-empty draft, checkpoints the
  // slot's states first (once per n_past).
  SeqChunk chunk(int32_t slot, std::span<const int32_t> draft, StateStore& states);
  const std::vector<int32_t>& draft() const { return draft_; }

  // After the step: `accepted` draft tokens matched and `next` was drawn
  // after them (the first mismatch's draw, or the bonus row's). Rolls back
  // rejected rows. `session` given: pages wholly past the sequence go back.
  void verified(int32_t slot, size_t accepted, int32_t next, StateStore& states, Session* session = nullptr);

 private:
  int32_t n_past_ = 0;
  std::vector<int32_t> pending_, draft_, chunk_;
  std::unique_ptr<SlotCheckpoint> checkpoint_;
  int32_t checkpoint_at_ = -1;
};

// The acceptance loop over the k + 1 logits rows of a verify chunk:
// draw(row) returns the token the sequence's sampler draws from a row
// (without recording it); keep(id, row) records and emits it and returns
// false when it ends the sequence. Returns the accepted draft count and the last
// token kept.
template <class Draw, class Keep>
std::pair<size_t, int32_t> verify_rows(std::span<const int32_t> draft, const float* rows, int64_t n_vocab, Draw&& draw,
                                       Keep&& keep);

}  // namespace vtc::serve

#include "serve/engine/speculative/verify_rows.inc"
