#include "serve/engine/generate.h"

#include <fmt/format.h>

#include <chrono>
#include <limits>

#include "frontends/gguf/tokenizer/tokenizer.h"
#include "runtime/session.h"
#include "serve/engine/output.h"
#include "serve/engine/speculative/model_drafter.h"
#include "support/error.h"

namespace vtc::serve {
namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

std::string describe_finish(const FinishReason& f) {
  std::string out(finish_name(f.kind));
  if (f.kind == Finish::Stop && f.eog) out += " (end of generation)";
  else if (f.kind == Finish::Stop && !f.matched_stop.empty()) out += fmt::format(" (stop string {:?})", f.matched_stop);
  else if (f.kind == Finish::Length && f.context_full) out += " (context full)";
  return out;
}

GenerateResult generate(Session& session, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                        const GenerateOptions& o, const PieceCallback& on_piece) {
  if (prompt.empty()) throw Error("generate: the prompt is empty");
  const bool speculate = o.spec.mode != SpecMode::Off;
  if (speculate && o.keep_logits) throw Error("generate: speculative decoding keeps no logits rows; use --spec off");
  if (o.spec.mode == SpecMode::Draft && !o.drafter) throw Error("generate: --spec draft without a draft model");
  const std::string host_drafts_because = speculate ? why_not_drafting_on_device(session, o) : "";
  if (o.spec.draft_on == DraftOn::Device && !host_drafts_because.empty())
    throw Error("--draft-on device: " + host_drafts_because);
  const bool drafts_on_device = speculate && host_drafts_because.empty() && o.spec.draft_on != DraftOn::Host;
  if (int64_t(prompt.size()) >= session.n_ctx())
    throw Error("generate: the prompt has " + std::to_string(prompt.size()) + " tokens but the context holds " +
                std::to_string(session.n_ctx()) + "; raise --ctx-size or shorten the prompt");
  GenerateResult result;
  result.prompt.assign(prompt.begin(), prompt.end());
  GenerationParams params;
  params.prompt = result.prompt;
  params.max_tokens = o.n_predict < 0 ? std::numeric_limits<int32_t>::max() : o.n_predict;
  params.sampling = o.sampling;
  params.stop = o.stop;
  Generation gen(params, tokenizer);
  session.reset(o.slot);
  if (params.max_tokens == 0 && !o.keep_logits) return result;

  auto start = std::chrono::steady_clock::now();
  HostTensor logits = session.prefill(o.slot, prompt, 0, o.keep_logits);
  if (o.spec.mode == SpecMode::Draft && params.max_tokens > 0) {
    // The draft model reads the prompt in the prompt's time, as the target
    // does (a job of no draft tokens only catches up); else its first draft
    // would prefill it inside the generation's time.
    ModelDrafter::Job read_prompt{o.slot, prompt, 0, 0.0f, 1, {}};
    o.drafter->draft({&read_prompt, 1});
  }
  result.prompt_seconds = seconds_since(start);
  if (o.keep_logits) result.logits.assign(logits.f32(), logits.f32() + logits.numel());
  if (params.max_tokens == 0) return result;  // -n 0 with --dump-logits: the prompt's rows alone
  std::vector<float> row = logits.row(logits.shape[0] - 1);

  start = std::chrono::steady_clock::now();
  int32_t position = int32_t(prompt.size());
  const bool on_device = o.device_sampling && !o.keep_logits && DeviceSampling::covers(o.sampling);
  const DeviceSampling device = DeviceSampling::of(o.sampling, gen.seed());
  int32_t next_id = -1;  // drawn on the backend by the last decode
  for (;;) {
    const int32_t token = next_id >= 0 ? next_id : gen.draw(row);
    gen.accept(token);
    result.generated.push_back(token);
    const TokenEvent ev = gen.emit(token, {}, position, session.n_ctx(), result.finish);
    result.text += ev.text;
    if (on_piece) on_piece(token, ev.text);
    const bool stop = result.finish.kind != Finish::None;
    if (speculate && !stop) {
      if (drafts_on_device) generate_speculative_on_device(session, gen, prompt, token, o, on_piece, result);
      else generate_speculative(session, gen, prompt, token, o, on_piece, result);
      break;
    }
    // With keep_logits the last token is decoded too, so every generated
    // token has the row computed from it (see GenerateResult::logits).
    if (stop && (!o.keep_logits || position >= session.n_ctx())) break;
    if (on_device) {
      if (next_id < 0) session.set_last_id(o.slot, token);  // drawn on the host, from the prompt's logits
      const std::vector<int32_t> slot{o.slot}, pos{position++};
      session.decode_sampled(slot, pos, {&device, 1});
      next_id = session.finish_sampled().at(0);
      continue;
    }
    HostTensor next = session.decode(std::vector<int32_t>{o.slot}, std::vector<int32_t>{token},
                                     std::vector<int32_t>{position++});
    row = next.row(0);
    if (o.keep_logits) result.logits.insert(result.logits.end(), row.begin(), row.end());
    if (stop) break;
  }
  result.generate_seconds = seconds_since(start);
  return result;
}

}  // namespace vtc::serve
