// Greedy n-gram speculation kept on the device: the two kernels the CUDA
// executor launches around a verify step (runtime/cuda/executor.h,
// "Drafting on the device"), so the step's ids and positions come from
// device memory and only the accepted tokens are copied out, behind the
// next step (docs/speculative.md). The seed's lesson (seed-pr-2550): the
// ids never round-trip through the host.
//
// Each drafting sequence owns one record of int32 words in device memory:
//   [kLen]         tokens in the history; the last one has not run yet
//   [kMatched]     1 when the drafts below come from an n-gram match
//   [kOutCount]    tokens the last verify step accepted (its drafts that
//                  matched, then the token drawn after them): 1..rows
//   [kOutDrafted]  drafts that step verified which came from a match
//   [kOut, +16)    those tokens
//   [kDrafts, +15) the drafts for the next step (kMaxDeviceDrafts)
//   [kHistory, +n_ctx) the sequence's tokens, prompt and output
// Words kOutCount .. kOut + 16 are the outcome the host reads.
//
// spec_rows(record, ids, pos, rows): before the step, writes its %ids
// (the history's last token, then rows - 1 drafts) and %pos (len - 1 + t).
//
// spec_accept(record, logits, rows, capacity), a block of 256 threads per
// (chunk of 2048 logits, row):
//  1. accept (rows > 0): each block writes its chunk's first maximum to
//     the record's partials; the last block to finish (a counter in the
//     record, left at zero) takes each row's greedy token from them, in
//     chunk order, by the `sample` op's rule (emit_sample.cpp: first
//     maximum, NaN never wins, a row with nothing above -inf gives 0),
//     and goes on alone: n = the leading drafts equal to their row's
//     token; the n drafts and row n's token are the outcome and are
//     appended to the history.
//  2. draft, the host drafter's rule (serve/engine/speculative/
//     ngram_drafter.h) without its hash maps: for N = 4 down to 1, the
//     latest end e in [N, len - 1] whose N tokens equal the history's last
//     N (a block-wide scan, then a max reduction); draft i is history
//     [e + i], continuing from the draft itself past the end. No match:
//     kMatched = 0 and the drafts repeat the last token (rows verify them
//     anyway: any draft equal to its row's greedy token is a correct
//     acceptance). Cost: O(len) per step, spread over the block.
// rows = 0 drafts only (a sequence's first step).
#pragma once

#include <cstdint>
#include <utility>

#include "codegen/cuda/kernel.h"

namespace vtc::cuda {

struct DeviceDraftRecord {
  static constexpr int64_t kMaxDrafts = kDecodeFormRows - 1;  // a verify step keeps decode's bits
  static constexpr int64_t kLen = 0, kMatched = 1, kOutCount = 2, kOutDrafted = 3, kOut = 4;
  static constexpr int64_t kDrafts = kOut + kMaxDrafts + 1, kDone = kDrafts + kMaxDrafts, kHistory = kDone + 1;
  static constexpr int64_t kOutcomeWords = kOut + kMaxDrafts + 1 - kOutCount;
  static constexpr int64_t kChunk = 2048;  // logits per argmax block
  static int64_t chunks(int64_t n_vocab) { return (n_vocab + kChunk - 1) / kChunk; }
  // The history, then the argmax blocks' partials: [rows][chunks] value
  // bits, then [rows][chunks] indices.
  static int64_t words(int64_t n_ctx, int64_t n_vocab) { return kHistory + n_ctx + 2 * (kMaxDrafts + 1) * chunks(n_vocab); }
};

Kernel spec_rows_kernel();
Kernel spec_accept_kernel(int64_t n_vocab);
// spec_accept's grid: (chunks, rows) blocks, (1, 1) for rows = 0.
inline std::pair<unsigned, unsigned> spec_accept_grid(int64_t n_vocab, int64_t rows) {
  return rows > 0 ? std::pair<unsigned, unsigned>(unsigned(DeviceDraftRecord::chunks(n_vocab)), unsigned(rows))
                  : std::pair<unsigned, unsigned>(1, 1);
}

}  // namespace vtc::cuda
