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
// rows_with_decode_bits) and each row is accepted by the token plain
// decoding takes from it (greedy, or with device sampling the `sample`
// op's draw at the row's position), so the tokens are plain decoding's.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "runtime/session.h"
#include "serve/engine/generate.h"
#include "serve/engine/output.h"
#include "serve/engine/speculative/draft_policy.h"

namespace vtc::serve {

std::string why_model_drafts_on_host(Session& session, SpecMode mode) {
  if (mode != SpecMode::Ngram) return "only the n-gram drafter runs on the device (--spec ngram)";
  if (!session.backend().drafts_on_device()) return fmt::format("the {} drafts on the host", session.backend().describe());
  return "";
}

std::string why_not_drafting_on_device(Session& session, const GenerateOptions& o) {
  if (o.spec.mode == SpecMode::Ngram && !DeviceSampling::covers(o.sampling))
    return "the device draws by the `sample` op, which applies no penalties (--repeat-penalty, --presence-penalty, "
           "--frequency-penalty)";
  if (o.spec.mode == SpecMode::Ngram && !(o.sampling.temperature <= 0.0f) && !o.device_sampling)
    return "a sampled generation drafts on the device with --device-sampling on (the device draws its rows by the "
           "`sample` op's rule, which plain decoding then uses too)";
  return why_model_drafts_on_host(session, o.spec.mode);
}

namespace {

// One generation's pipelined verify steps (see above).
class DeviceSpecLoop {
 public:
  DeviceSpecLoop(Session& session, Generation& gen, std::span<const int32_t> prompt, const GenerateOptions& o,
                 const PieceCallback& on_piece, GenerateResult& result)
      : session_(session), gen_(gen), prompt_(prompt), o_(o), on_piece_(on_piece), result_(result),
        most_drafts_(std::min(o.spec.draft_max, session.backend().rows_with_decode_bits() - 1)) {}

  void run(int32_t first) {
    std::vector<int32_t> history(prompt_.begin(), prompt_.end());
    history.push_back(first);
    session_.start_device_drafts(o_.slot, history, DeviceSampling::of(o_.sampling, gen_.seed()));
    known_ = int64_t(history.size());
    last_read_ = std::chrono::steady_clock::now();
    for (;;) {
      const int32_t queued = in_flight_, k = next_drafts();
      std::vector<DeviceVerifyOutcome> previous;
      if (k >= 0) {
        // The step reaches at most the in-flight step's reach plus its own rows.
        const Session::DeviceVerifyRows rows{o_.slot, k, known_ + in_flight_ + k};
        previous = session_.verify_on_device({&rows, 1});
        in_flight_ = k + 1;
      } else if (in_flight_ > 0) {
        previous = session_.finish_device_verify();
        in_flight_ = 0;
      }
      if (!previous.empty()) consume(previous.at(0), queued);
      if (finished_ && in_flight_ > 0) {
        session_.finish_device_verify();  // queued past the end: discarded
        in_flight_ = 0;
      }
      if (in_flight_ == 0 && (finished_ || k < 0)) break;
    }
    session_.truncate(o_.slot, int64_t(prompt_.size() + result_.generated.size()));
  }

 private:
  // The next step's draft count, or -1 when no step may be queued: the
  // generation ended, or the steps in flight reach the context or -n.
  int32_t next_drafts() {
    const int64_t reach = known_ + in_flight_;  // the most tokens the queued step can leave
    const int64_t least_output = int64_t(result_.generated.size()) + (in_flight_ > 0 ? 1 : 0);
    int64_t room = std::min<int64_t>(most_drafts_, session_.n_ctx() - reach);
    if (o_.n_predict >= 0) room = std::min<int64_t>(room, int64_t(o_.n_predict) - least_output - 1);
    if (finished_ || room < 0) return -1;
    int32_t k = int32_t(room);
    if (k > 0 && o_.spec.adaptive)
      k = record_.plain_left > 0 ? 0 : policy_.length(record_, k, o_.spec.draft_min, o_.spec.draft_max, 1, 1);
    return k < std::max(o_.spec.draft_min, 1) ? 0 : k;
  }

  // A step's outcome: counts, the policy, and its tokens emitted. Its time
  // is the interval since the previous outcome was read (the device runs
  // the queued steps back to back: in steady state the step's own time).
  void consume(const DeviceVerifyOutcome& out, int32_t rows) {
    const auto now = std::chrono::steady_clock::now();
    policy_.step_timed(rows, std::chrono::duration<double>(now - last_read_).count());
    last_read_ = now;
    const int32_t k = out.verified(rows - 1), accepted = out.accepted();
    SpecCounts& c = result_.spec;
    ++c.steps;
    if (k > 0 && !out.tokens.empty()) {
      policy_.verified(record_, k, accepted);
      c.draft_n += k;
      c.draft_n_accepted += accepted;
      ++c.verify_steps;
      c.longest_verify = std::max<int64_t>(c.longest_verify, rows);
    } else if (!out.tokens.empty()) {
      policy_.decoded_plainly(record_);
    }
    known_ += int64_t(out.tokens.size());
    for (const int32_t id : out.tokens) {
      if (finished_) break;
      gen_.accept(id);
      result_.generated.push_back(id);
      const int64_t position = int64_t(prompt_.size() + result_.generated.size()) - 1;
      const TokenEvent ev = gen_.emit(id, {}, position, session_.n_ctx(), result_.finish);
      result_.text += ev.text;
      if (on_piece_) on_piece_(id, ev.text);
      finished_ = result_.finish.kind != Finish::None;
    }
  }

  Session& session_;
  Generation& gen_;
  std::span<const int32_t> prompt_;
  const GenerateOptions& o_;
  const PieceCallback& on_piece_;
  GenerateResult& result_;
  const int32_t most_drafts_;
  int64_t known_ = 0;      // tokens whose outcome the host has read; the last has not run
  int32_t in_flight_ = 0;  // rows of the step queued and not read yet (0: none)
  bool finished_ = false;
  DraftPolicy policy_;
  DraftPolicy::Sequence record_;
  std::chrono::steady_clock::time_point last_read_;
};

}  // namespace

void generate_speculative_on_device(Session& session, Generation& gen, std::span<const int32_t> prompt, int32_t first,
                                    const GenerateOptions& o, const PieceCallback& on_piece, GenerateResult& result) {
  result.spec.drafted_on_device = true;
  DeviceSpecLoop(session, gen, prompt, o, on_piece, result).run(first);
}

}  // namespace vtc::serve
