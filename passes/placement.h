// placement{target=cpu|cuda}: assigns host or device to every value and
// inserts explicit transfers where a value crosses.
//
// Algorithm:
//  1. Drop existing to_host/to_device ops (their uses read the operand), so
//     the pass is idempotent and owns every transfer.
//  2. Declarations and arguments:
//     - cpu: every weight, state and function argument is rewritten to host
//       (a CPU build has no device; the declared placement describes the
//       CUDA layout the frontend chose).
//     - cuda: weights, states and arguments keep their declared placement;
//       the runtime uploads arguments declared on the device.
//  3. Each op's place, in order: `weight` and `state_read` produce where the
//     declaration lives; `state_write` runs where its state lives; every
//     other op runs on the target's compute place (cpu: host, cuda: device).
//     No op in the table requires the host today; ops listed by the option
//     host_ops=a|b (mnemonics) are forced there. Hence sampled ids
//     (argmax/top_k), the ids fed to the next step and every ngram_hash stay
//     on the device for cuda.
//  4. An operand living elsewhere than its op's place gets a to_host or
//     to_device inserted just before the op (one per value and place,
//     reused by later ops). Return operands are left where they are.
//  5. Every inserted transfer is recorded (transfers()), published as a
//     remark ("placement: @decode: to_host(%tok) for state_write @last_ids")
//     and as the "placement" artifact, so a drain cannot appear silently.
//     The option max_transfers=N turns more than N transfers into an error.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/types.h"
#include "passes/pass.h"

namespace vtc::passes {

struct TransferRecord {
  std::string function;
  std::string kind;      // to_host | to_device
  std::string value;     // the value moved (rewrite.h describe())
  std::string consumer;  // the op that needed it, e.g. "state_write @last_ids"
  std::string str() const;
};

class PlacementPass final : public Pass {
 public:
  using Target = vtc::Target;
  PlacementPass(Target target, std::vector<std::string> host_ops, int64_t max_transfers);
  std::string_view name() const override { return "placement"; }
  bool run(ir::Module& module, PassContext& context) override;
  const std::vector<TransferRecord>& transfers() const { return transfers_; }

 private:
  Target target_;
  std::vector<std::string> host_ops_;
  int64_t max_transfers_;
  std::vector<TransferRecord> transfers_;
};

std::unique_ptr<Pass> create_placement(const PassOptions& options);

}  // namespace vtc::passes
