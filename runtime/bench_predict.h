// `vtc bench --target cuda` on the simulated device: instead of timing the
// simulator (which says nothing of a GPU), it runs each benchmarked step
// once in the simulated device's profile mode and prices it on a named GPU
// with the cost model (runtime/cuda/cost_model.h). Every figure it returns
// is a prediction and is labelled so.
//
// The steps: the prefill of `prompt_tokens` tokens in one sequence (from an
// empty context), and one decode step of each batch size in `batch_rows`
// (each sequence holding `batch_context` tokens, after one unprofiled
// warm-up step so graphs are captured and pages allocated), sampled on the
// device as a generation does; then a verify step of each of
// `verify_rows` rows.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/cuda/cost_model.h"

namespace vtc {

struct SessionOptions;

struct PredictSpec {
  std::string gpu = "h200";
  int32_t prompt_tokens = 512;           // 0: no prefill step
  std::vector<int32_t> batch_rows{1, 8};  // decode steps
  int32_t batch_context = 64;
  // Speculative verify steps (`vtc bench --verify-cost`): one sequence's
  // @prefill chunk of each of these row counts (1 + k) after
  // batch_context tokens, every row's logits kept.
  std::vector<int32_t> verify_rows;
  // With verify_rows: each also as a verify step drafted on the device
  // (Session::verify_on_device: the ids and positions written there, the
  // acceptance and the next draft computed there, no logits copied out),
  // after the host-drafted ones, in the same order.
  bool device_drafted = false;
  // > 0: price the launches between the first and the last that read a
  // blk.N weight as if the model had this many layers (a 2-layer file
  // with 8B widths reported as the 32-layer model).
  int32_t scale_layers = 0;
  // > 1: inside each profiled step only one block in this many runs and is
  // profiled, and the counts are scaled: a cost-only run for steps too big
  // to simulate whole (a 512-token prefill of an 8B-shaped layer).
  int32_t sample_blocks = 1;
};

struct PredictedStep {
  cuda::StepCost cost;
  std::string table, json;
};

// The same steps on a GPU, each kernel timed with CUDA events (graphs off),
// per family; against `predicted` (a simulated run's `vtc bench --json`)
// when given: the cost model's calibration (scripts/gpu-check).
struct MeasuredStep {
  std::string table, json;
  double measured_us = 0, predicted_us = -1;  // kernel time of the step; -1: no prediction
};

// Sets VTC_CUDA_SIM_PROFILE=1 for the simulated device this process loads
// (call before any CUDA session is created). Throws vtc::Error when the
// target is not cuda on the simulated device.
void enable_simulated_profile();

std::vector<PredictedStep> predict_cuda_steps(const std::string& model, const SessionOptions& options,
                                              const PredictSpec& spec,
                                              const std::function<void(const std::string&)>& progress = nullptr);

std::vector<MeasuredStep> measure_cuda_steps(const std::string& model, const SessionOptions& options,
                                             const PredictSpec& spec, const nlohmann::json* predicted,
                                             const std::function<void(const std::string&)>& progress = nullptr);

}  // namespace vtc
