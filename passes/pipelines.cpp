#include "passes/pipelines.h"

#include <fmt/format.h>

#include "support/error.h"

namespace vtc::passes {

std::string rewrite_pipeline(const PipelineSpec& o) {
  if (o.weight_layout_types != "reference" && o.weight_layout_types != "all")
    throw Error(fmt::format("compile: weight layout types must be reference or all, got '{}'", o.weight_layout_types));
  const std::string fusion = o.optimize ? fmt::format("fuse{{target={}}},canonicalize,", target_name(o.target)) : "";
  // After fusion: it follows the weights into the regions' bodies.
  const std::string layout =
      o.target == Target::Cpu ? fmt::format("weight-layout{{target=cpu,types={}}},", o.weight_layout_types) : "";
  return fmt::format("canonicalize,{}{}placement{{target={}}}", fusion, layout, target_name(o.target));
}

std::string standard_pipeline(const PipelineSpec& o) {
  if (o.max_step_tokens < 1 || o.max_sequences < 1)
    throw Error(fmt::format("compile: bounds must be positive (max step tokens {}, max sequences {})", o.max_step_tokens,
                            o.max_sequences));
  return fmt::format("{},memory-plan{{T={},R={},S={}}},bind-state", rewrite_pipeline(o), o.max_step_tokens,
                     o.max_sequences, o.max_sequences);
}

}  // namespace vtc::passes
