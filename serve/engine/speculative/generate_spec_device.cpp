// `vtc run`'s decode loop with the n-gram drafter on the backend
// (Backend::drafts_on_device, the CUDA executor): the history, the drafts
// and the acceptance stay in device memory (codegen/cuda/device_drafts.h),
// and the host only reads each step's accepted tokens after it has queued
// the next step.
//
// Pipelining. The host learns a step's outcome one step late, so it plans
// step N + 1 before knowing how many tokens step N accepted:
//   - pages: reserved for the most step N could reach (all its drafts
//     accepted) plus step N + 1's own rows; pages wholly past the final
//     length go back at the end (Session::truncate);
//   - the draft length k of step N + 1: DraftPolicy on the outcomes known
//     (one step old), within the context and the output limit;
//   - the output limit: no step is queued once the steps in flight will
//     reach it; a step queued past an end of generation is discarded (its
//     rows only wrote positions past the sequence).
// The rows' bits are decode's (at most 16 rows: Backend::
// rows_with_decode_bits) and the acceptance is greedy, so the tokens are
// plain decoding's.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "runtime/session.h"
#include "serve/engine/generate.h"
#include "serve/engine/output.h"
#include "serve/engine/speculative/draft_policy.h"

namespace vtc::serve {

std::string why_not_drafting_on_device(Session& session, const GenerateOptions& o) {
  if (o.spec.mode != SpecMode::Ngram) return "only the n-gram drafter runs on the device (--spec ngram)";
  if (!session.backend().drafts_on_device()) return fmt::format("the {} drafts on the host", session.backend().describe());
  if (!(o.sampling.temperature <= 0.0f) || !DeviceSampling::covers(o.sampling))
    return "the device accepts by greedy decoding without penalties (--temp 0)";
  if (session.states().carries_recurrent_state())
    return "this model has recurrent state, which a rejected draft rolls back from a host-driven checkpoint";
  return "";
}

void generate_speculative_on_device(Session& session, Generation& gen, std::span<const int32_t> prompt, int32_t first,
                                    const GenerateOptions& o, const PieceCallback& on_piece, GenerateResult& result) {
  result.spec.drafted_on_device = true;
  const int32_t slot = o.slot;
  const int64_t n_ctx = session.n_ctx();
  const int32_t most_drafts = std::min(o.spec.draft_max, session.backend().rows_with_decode_bits() - 1);
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  history.push_back(first);
  session.start_device_drafts(slot, history);
  int64_t known = int64_t(history.size());  // tokens whose outcome the host has read; the last has not run
  DraftPolicy policy;
  DraftPolicy::Sequence record;
  int32_t in_flight = 0;  // rows of the step queued and not read yet (0: none)
  bool finished = false;

  // A step's time: from the previous outcome read to this one (the device
  // runs the queued steps back to back, so in steady state that is the
  // step's own time).
  auto last_read = std::chrono::steady_clock::now();
  auto consume = [&](const DeviceVerifyOutcome& out, int32_t rows) {
    const auto now = std::chrono::steady_clock::now();
    policy.step_timed(rows, std::chrono::duration<double>(now - last_read).count());
    last_read = now;
    const int32_t k = rows - 1, accepted = int32_t(out.tokens.size()) - 1;
    ++result.spec.steps;
    if (k > 0) {
      policy.verified(record, k, accepted);
      result.spec.draft_n += k;
      result.spec.draft_n_accepted += accepted;
      ++result.spec.verify_steps;
      result.spec.longest_verify = std::max<int64_t>(result.spec.longest_verify, rows);
    } else {
      policy.decoded_plainly(record);
    }
    known += int64_t(out.tokens.size());
    for (const int32_t id : out.tokens) {
      if (finished) break;
      gen.accept(id);
      result.generated.push_back(id);
      const int64_t position = int64_t(prompt.size() + result.generated.size()) - 1;
      const TokenEvent ev = gen.emit(id, {}, position, n_ctx, result.finish);
      result.text += ev.text;
      if (on_piece) on_piece(id, ev.text);
      finished = result.finish.kind != Finish::None;
    }
  };

  for (;;) {
    // The most positions the queued step can reach, and the least output
    // it gives.
    const int64_t reach = known + in_flight;
    const int64_t least_output = int64_t(result.generated.size()) + (in_flight > 0 ? 1 : 0);
    int64_t room = std::min<int64_t>(most_drafts, n_ctx - reach);
    if (o.n_predict >= 0) room = std::min<int64_t>(room, int64_t(o.n_predict) - least_output - 1);
    const bool queue = !finished && room >= 0;
    std::optional<DeviceVerifyOutcome> previous;
    const int32_t queued = in_flight;
    if (queue) {
      int32_t k = int32_t(room);
      if (k > 0 && o.spec.adaptive) k = record.plain_left > 0 ? 0 : policy.length(record, k, o.spec.draft_min, o.spec.draft_max, 1, 1);
      if (k < std::max(o.spec.draft_min, 1)) k = 0;
      in_flight = k + 1;
      previous = session.verify_on_device(slot, k, reach - 1 + k + 1);
    } else if (in_flight > 0) {
      previous = session.finish_device_verify();
      in_flight = 0;
    }
    if (previous) consume(*previous, queued);
    if (finished && in_flight > 0) {
      session.finish_device_verify();  // queued past the end: discarded
      in_flight = 0;
    }
    if (in_flight == 0 && (finished || !queue)) break;
  }
  session.truncate(slot, int64_t(prompt.size() + result.generated.size()));
}

}  // namespace vtc::serve
