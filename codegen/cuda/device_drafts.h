// N-gram speculation kept on the device: the kernels the CUDA executor
// launches around a verify step (runtime/cuda/executor.h, "Drafting on
// the device"), so the step's ids and positions come from device memory
// and only the accepted tokens are copied out, behind the next step
// (docs/speculative.md). The seed's lesson (seed-pr-2550): the ids never
// round-trip through the host.
//
// Each drafting sequence owns one record of int32 words in device memory:
//   [kLen]         tokens in the history; the last one has not run yet
//   [kMatched]     1 when the drafts below come from an n-gram match
//   [kOutCount]    tokens the last verify step accepted (its drafts that
//                  matched, then the token drawn after them): 1..rows, or
//                  0 for a step that only replayed (below)
//   [kOutDrafted]  drafts that step verified which came from a match
//   [kOutReplayed] rows that step spent replaying
//   [kOut, +16)    the accepted tokens
//   [kDrafts, +15) the drafts for the next step (kMaxDeviceDrafts)
//   [kSampling, +4) the `sample` op's settings as f32 bits (temperature,
//                  top_k, top_p, min_p), [kSeed, +2) its seed's low and
//                  high words: a sampled sequence's, for every row
//   [kRowPos, +16) the last verify step's %pos (the step's own copy is
//                  an argument whose buffer the memory plan reuses)
//   [kDrawn, +16)  a sampled verify step's draws, one a row
//   [kRun]         history tokens the slot's states have run: len - 1,
//                  less after a recurrent rollback (below)
//   [kRecurrent]   1 when the slot has recurrent states
//   [kRestore]     1 when the last step rolled them back
//   [kHistory, +n_ctx) the sequence's tokens, prompt and output
// Words kOutCount .. kOut + 16 are the outcome the host reads.
//
// spec_rows(record, ids, pos, rows): before the step, writes its %ids and
// %pos: row t runs history token run + t while that is below len (the
// replayed tokens, then the last one), then the drafts in order, at
// position run + t; and %pos again into kRowPos.
//
// spec_accept(record, logits, rows, capacity, drawn), a block of 256
// threads per (chunk of 2048 logits, row):
//  1. accept (rows > 0): each block writes its chunk's first maximum to
//     the record's partials; the last block to finish (a counter in the
//     record, left at zero) takes each row's greedy token from them, in
//     chunk order, by the `sample` op's rule (emit_sample.cpp: first
//     maximum, NaN never wins, a row with nothing above -inf gives 0),
//     and goes on alone. The first r = len - 1 - run rows replayed known
//     tokens: a step of at most r rows only replays (run += rows, no
//     outcome). Otherwise row r ran the last token and the rows after it
//     the d = rows - 1 - r drafts: n = the leading drafts equal to their
//     row's token; the n drafts and row r + n's token are the outcome and
//     are appended to the history.
//  2. draft, the host drafter's rule (serve/engine/speculative/
//     ngram_drafter.h) without its hash maps: for N = 4 down to 1, the
//     latest end e in [N, len - 1] whose N tokens equal the history's last
//     N (a block-wide scan, then a max reduction); draft i is history
//     [e + i], continuing from the draft itself past the end. No match:
//     kMatched = 0 and the drafts repeat the last token (rows verify them
//     anyway: any draft equal to its row's greedy token is a correct
//     acceptance). Cost: O(len) per step, spread over the block.
// rows = 0 drafts only (a sequence's first step).
//
// A sampled sequence (temperature > 0) draws its rows instead of taking
// their greedy tokens: before spec_accept, the `sample` op's two kernels
// (emit_sample.cpp, sample_rows_kernels) draw each row t from its logits
// with the record's settings and seed at the row's input position
// (kRowPos), into kDrawn; spec_accept (drawn = 1, one block) then compares
// the drafts with those draws. For a point-mass draft this is the
// rejection rule of Leviathan et al. (keep x when the draw y ~ p equals
// it, else keep y: docs/speculative.md), and every kept token is the draw
// plain decoding makes at its position, so a seeded request gives the
// tokens of `--spec off`.
//
// Rollback. KV rows are positional: the next step overwrites a rejected
// row before any row reads it, so run = len - 1 always. Recurrent states
// (conv rings, delta-rule and scan matrices, the n-gram history) ran every
// row, so before each verify step the executor copies the slot's states
// into the sequence's checkpoint; when a draft is rejected spec_accept
// sets kRestore and leaves run where it was, and spec_restore copies the
// checkpoint back, in stream order: the next steps replay the history from
// run (the checkpoint's tokens), with decode's bits, then verify their
// drafts. All on the device: the host never orders a restore.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "codegen/cuda/kernel.h"

namespace vtc::cuda {

struct DeviceDraftRecord {
  static constexpr int64_t kMaxDrafts = kDecodeFormRows - 1;  // a verify step keeps decode's bits
  static constexpr int64_t kLen = 0, kMatched = 1, kOutCount = 2, kOutDrafted = 3, kOutReplayed = 4, kOut = 5;
  static constexpr int64_t kDrafts = kOut + kMaxDrafts + 1, kDone = kDrafts + kMaxDrafts;
  static constexpr int64_t kSampling = kDone + 1, kSeed = kSampling + 4, kRowPos = kSeed + 2;
  static constexpr int64_t kDrawn = kRowPos + kMaxDrafts + 1, kRun = kDrawn + kMaxDrafts + 1;
  static constexpr int64_t kRecurrent = kRun + 1, kRestore = kRecurrent + 1, kHistory = kRestore + 1;
  static constexpr int64_t kOutcomeWords = kOut + kMaxDrafts + 1 - kOutCount;
  static constexpr int64_t kChunk = 2048;  // logits per argmax block
  static int64_t chunks(int64_t n_vocab) { return (n_vocab + kChunk - 1) / kChunk; }
  // The history, then the argmax blocks' partials: [rows][chunks] value
  // bits, then [rows][chunks] indices.
  static int64_t words(int64_t n_ctx, int64_t n_vocab) { return kHistory + n_ctx + 2 * (kMaxDrafts + 1) * chunks(n_vocab); }
};

Kernel spec_rows_kernel();
// spec_restore(record, to, from, bytes): copies `bytes` (a multiple of 4)
// when the record's kRestore is set; launched with spec_restore_blocks().
Kernel spec_restore_kernel();
inline unsigned spec_restore_blocks(uint64_t bytes) { return unsigned(std::min<uint64_t>((bytes / 4 + 255) / 256, 1024)); }
// spec_accept(record, logits, rows, capacity, drawn): drawn = 1 takes the
// rows' tokens from kDrawn (a sampled step) instead of their argmax.
Kernel spec_accept_kernel(int64_t n_vocab);
// spec_accept's grid: (chunks, rows) blocks, (1, 1) for rows = 0 or drawn.
inline std::pair<unsigned, unsigned> spec_accept_grid(int64_t n_vocab, int64_t rows, bool drawn) {
  return rows > 0 && !drawn
             ? std::pair<unsigned, unsigned>(unsigned(DeviceDraftRecord::chunks(n_vocab)), unsigned(rows))
             : std::pair<unsigned, unsigned>(1, 1);
}

// The `sample` op's two kernels (emit_sample.cpp) over up to
// kDecodeFormRows rows that are no IR value, with one setting for every
// row: a sampled sequence's draws. Parameters, in order: partial (logits,
// params, scratch, rows), launched as (chunks, rows) blocks; pick (params,
// seed, pos, tokens, scratch, rows), launched as rows blocks.
struct SampleRowsKernels {
  Kernel partial, pick;
  int64_t scratch_bytes = 0;
  int64_t chunks = 0;
};
SampleRowsKernels sample_rows_kernels(int64_t vocab, int64_t max_k);

}  // namespace vtc::cuda
