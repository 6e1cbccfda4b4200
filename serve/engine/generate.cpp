#include "runtime/generate.h"

#include <chrono>

#include "frontends/gguf/tokenizer/tokenizer.h"
#include "runtime/session.h"
#include "support/error.h"

namespace vtc {
namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

GenerateResult generate(Session& session, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                        const GenerateOptions& o, const std::function<void(int32_t, const std::string&)>& on_piece) {
  if (prompt.empty()) throw Error("generate: the prompt is empty");
  if (int64_t(prompt.size()) >= session.n_ctx())
    throw Error("generate: the prompt has " + std::to_string(prompt.size()) + " tokens but the context holds " +
                std::to_string(session.n_ctx()) + "; raise --ctx-size or shorten the prompt");
  GenerateResult result;
  result.prompt.assign(prompt.begin(), prompt.end());
  Sampler sampler(o.sampling);
  for (int32_t t : prompt) sampler.accept(t);
  StreamingDecoder stream(tokenizer, /*skip_special=*/true);
  session.reset(o.slot);

  auto start = std::chrono::steady_clock::now();
  HostTensor logits = session.prefill(o.slot, prompt, 0, o.keep_logits);
  result.prompt_seconds = seconds_since(start);
  if (o.keep_logits) result.logits.assign(logits.f32(), logits.f32() + logits.numel());
  std::vector<float> row = logits.row(logits.shape[0] - 1);

  start = std::chrono::steady_clock::now();
  int32_t position = int32_t(prompt.size());
  result.stop_reason = "length";
  const SamplingParams& sp = o.sampling;
  const bool on_device = o.device_sampling && !o.keep_logits && DeviceSampling::covers(sp);
  const DeviceSampling device = DeviceSampling::of(sp, sampler.seed());
  int32_t next_id = -1;  // drawn on the backend by the last decode
  while (o.n_predict < 0 || int32_t(result.generated.size()) < o.n_predict) {
    const int32_t token = next_id >= 0 ? next_id : sampler.sample(row);
    sampler.accept(token);
    result.generated.push_back(token);
    if (on_piece) on_piece(token, stream.push(token));
    bool stop = false;
    if (tokenizer.is_eog(token)) stop = true, result.stop_reason = "eog";
    else if (o.n_predict >= 0 && int32_t(result.generated.size()) == o.n_predict) stop = true;
    if (position >= session.n_ctx()) {
      result.stop_reason = stop ? result.stop_reason : "context";
      break;
    }
    // With keep_logits the last token is decoded too, so every generated
    // token has the row computed from it (see GenerateResult::logits).
    if (stop && !o.keep_logits) break;
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
  if (on_piece) {
    std::string tail = stream.flush();
    if (!tail.empty()) on_piece(-1, tail);
  }
  result.generate_seconds = seconds_since(start);
  return result;
}

}  // namespace vtc
