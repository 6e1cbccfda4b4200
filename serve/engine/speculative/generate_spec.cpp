// `vtc run`'s decode loop with speculation: one sequence, one verify step
// at a time (serve/engine/speculative/verify.h), drafts from the n-gram
// drafter or the draft model, their length chosen by DraftPolicy.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "runtime/session.h"
#include "serve/engine/generate.h"
#include "serve/engine/output.h"
#include "serve/engine/speculative/draft_policy.h"
#include "serve/engine/speculative/model_drafter.h"
#include "serve/engine/speculative/ngram_drafter.h"
#include "serve/engine/speculative/verify.h"

namespace vtc::serve {
namespace {

// Draft tokens the step may verify: within the context, in a step whose
// rows carry decode's bits (Backend::rows_with_decode_bits), and no more
// than the output still allowed needs (its last token comes from the bonus
// row).
int32_t draft_room(const SpecSequence& seq, Session& session, const GenerateResult& r, const GenerateOptions& o) {
  int64_t room = session.n_ctx() - seq.positions_after(0);
  const int64_t rows = std::min<int64_t>(session.max_step_tokens(), session.backend().rows_with_decode_bits());
  room = std::min<int64_t>(room, rows - int64_t(seq.pending().size()));
  if (o.n_predict >= 0) room = std::min<int64_t>(room, int64_t(o.n_predict) - int64_t(r.generated.size()) - 1);
  return int32_t(std::clamp<int64_t>(room, 0, o.spec.draft_max));
}

// This step's draft. The draft model drafts only the length the policy
// picks (each of its tokens is a step of its own); the n-gram drafter's
// draft, free, is cut to it.
std::vector<int32_t> propose(const GenerateOptions& o, DraftPolicy& policy, DraftPolicy::Sequence& record,
                             const NgramDrafter& ngram, std::span<const int32_t> sequence, int32_t slot, int32_t room) {
  if (room <= 0) return {};
  const bool ngram_mode = o.spec.mode == SpecMode::Ngram;
  std::vector<int32_t> draft = ngram_mode ? ngram.draft(room) : std::vector<int32_t>{};
  int32_t k = ngram_mode ? int32_t(draft.size()) : room;
  if (o.spec.adaptive && k > 0) k = policy.length(record, k, o.spec.draft_min, o.spec.draft_max, 1, 1);
  if (!ngram_mode && k > 0) {
    ModelDrafter::Job job{slot, sequence, k, o.spec.p_min, o.spec.draft_min, {}};
    DraftPolicy::Sequence* owner = &record;
    draft_and_account(*o.drafter, policy, {&job, 1}, {&owner, 1});
    draft = std::move(job.draft);
  }
  if (int32_t(draft.size()) < std::max(o.spec.draft_min, 1)) return {};
  draft.resize(std::min(draft.size(), size_t(k)));
  return draft;
}

}  // namespace

void generate_speculative(Session& session, Generation& gen, std::span<const int32_t> prompt, int32_t first,
                          const GenerateOptions& o, const PieceCallback& on_piece, GenerateResult& result) {
  const int32_t slot = o.slot;
  SpecSequence seq;
  seq.start(int32_t(prompt.size()), first);
  NgramDrafter ngram;
  std::vector<int32_t> sequence(prompt.begin(), prompt.end());  // prompt and output, for the drafters
  sequence.push_back(first);
  if (o.spec.mode == SpecMode::Ngram) ngram.append(sequence);
  DraftPolicy policy;
  DraftPolicy::Sequence record;
  const int64_t V = session.n_vocab();
  // Plain decoding would sample on the backend: draw the verify rows by
  // the `sample` op's rule, so the tokens do not depend on --spec.
  const bool backend_rule = o.device_sampling && DeviceSampling::covers(o.sampling);
  const DeviceSampling backend = DeviceSampling::of(o.sampling, gen.seed());
  for (;;) {
    const int32_t room = draft_room(seq, session, result, o);
    std::vector<int32_t> draft = propose(o, policy, record, ngram, sequence, slot,
                                        room > 0 && record.plain_left == 0 && seq.may_draft() ? room : 0);
    const SeqChunk chunk = seq.chunk(slot, draft, session.states());
    const auto t0 = std::chrono::steady_clock::now();
    const HostTensor logits = session.step({&chunk, 1});
    policy.step_timed(int32_t(chunk.tokens.size()), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    bool finished = false;
    size_t row_index = 0;
    const auto [accepted, next] = verify_rows(
        draft, logits.f32(), V,
        [&](std::span<const float> row) {
          return backend_rule ? backend.draw_on_host(row, seq.row_position(row_index++)) : gen.draw(row);
        },
        [&](int32_t id, std::span<const float>) {
          gen.accept(id);
          result.generated.push_back(id);
          sequence.push_back(id);
          if (o.spec.mode == SpecMode::Ngram) ngram.append(id);
          const int64_t position = int64_t(prompt.size() + result.generated.size()) - 1;
          const TokenEvent ev = gen.emit(id, {}, position, session.n_ctx(), result.finish);
          result.text += ev.text;
          if (on_piece) on_piece(id, ev.text);
          finished = result.finish.kind != Finish::None;
          return !finished;
        });
    ++result.spec.steps;
    if (const int32_t k = int32_t(draft.size()); k > 0) {
      policy.verified(record, k, int32_t(accepted));
      result.spec.draft_n += k;
      result.spec.draft_n_accepted += int64_t(accepted);
      ++result.spec.verify_steps;
      result.spec.longest_verify = std::max<int64_t>(result.spec.longest_verify, int64_t(chunk.tokens.size()));
    } else {
      policy.decoded_plainly(record);
    }
    if (finished) break;
    seq.verified(slot, accepted, next, session.states(), &session);
  }
}

}  // namespace vtc::serve
