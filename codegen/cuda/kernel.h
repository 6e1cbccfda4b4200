// CUDA kernels generated from the lowered IR: what one launch needs.
//
// The code generator turns every compute op of a step function into one or
// more Kernels. A Kernel is a whole CUDA C++ translation unit (the shared
// prelude, the helpers it uses, one `extern "C" __global__` entry) plus the
// description of its launch: which buffers and run-time integers its
// parameters are, and its grid as dims over the step symbols (T, S, R, ...).
// The executor (runtime/cuda) resolves the arguments and evaluates the grid
// per step; the source never changes with the step size, so a kernel is
// compiled once.
//
// Constant dims (hidden sizes, head counts, vocabulary) are baked into the
// source as literals; symbolic dims become `long long` parameters named
// s_<symbol>. The entry name is the op's mnemonic plus a hash of the source,
// so identical kernels (one per layer, same shapes) share one compile.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/module.h"

namespace vtc::cuda {

struct KernelArg {
  enum class Kind : uint8_t {
    Value,      // the device buffer of an IR value (operand or result)
    Symbol,     // a step symbol (T, S, ...) as long long, parameter s_<symbol>
    StateRows,  // base of a plain/ring state: [n_slots][row]
    StatePool,  // base of a paged state's K (half 0) or V (half 1) pool
    Slots,      // int32 [S]: the state slot of each sequence of the step
    PageTable,  // int32 [S][PT_STRIDE]: each sequence's KV pages
    Scratch,    // a per-step scratch buffer of scratch_bytes
    Extra,      // a pointer the executor supplies by name (sampler buffers)
    Counters,   // int32 [counter_ints], zero when the bucket is made; a kernel
                // leaves every counter it uses at zero again
  };
  Kind kind = Kind::Value;
  const ir::ValueData* value = nullptr;  // Value
  std::string name;                      // parameter name (Symbol: the symbol itself)
  std::string state;                     // StateRows, StatePool: the state's name
  int half = 0;                          // StatePool
  std::string ctype;                     // C type of the parameter
};

// Which buckets of a step launch a kernel. A step over T rows (prefill,
// verify) of at most kDecodeFormRows rows runs the kernels decode runs
// (GEMV, flash decoding: generate_step's "decode form"), so each of its
// rows has the bits plain decoding gives that token (a speculative verify
// row must: docs/speculative.md); a step of more rows runs the tiled GEMMs
// and prefill attention, unless it asks for decode's bits (launches_in). A
// step without T launches every kernel.
enum class RowsGuard : uint8_t { Always, FewRows, ManyRows };
constexpr int64_t kDecodeFormRows = 16;

struct Kernel {
  std::string entry;    // extern "C" name: <mnemonic>_<16 hex digits of the source hash>
  std::string source;   // the complete translation unit
  std::string what;     // for messages: "rms_norm (op #7 in @decode)"
  const ir::Op* op = nullptr;  // the op it implements (the cost model prices its work from the IR)
  std::vector<KernelArg> args;
  // Launch: ceil(threads_x / block) blocks along x and
  // ceil(rows_y / rows_per_block_y) along y.
  ir::Dim threads_x = 1;
  ir::Dim rows_y = 1;
  int rows_per_block_y = 1;
  int block = 256;
  ir::Dim scratch_bytes = 0;  // size of the Scratch argument, if any
  ir::Dim counter_ints = 0;   // size of the Counters argument, if any
  // Activation codes in the scratch (the decode GEMV's quantized x,
  // emit_gemv.cpp): a quantize kernel writes those of one value, a GEMV
  // reads them. generate_step drops a quantize whose codes the scratch
  // still holds from an earlier one.
  const ir::ValueData* writes_codes_of = nullptr;
  const ir::ValueData* reads_codes_of = nullptr;
  // FP32 work when it is not the op's (the cost model's op_flops): a
  // quantize kernel, or a GEMV whose products run as __dp4a.
  std::optional<ir::Dim> fp32_flops;
  RowsGuard guard = RowsGuard::Always;
};

// Whether `k` launches in a bucket whose T is `t_rows` (nullopt: the step
// has no T symbol). `rows_as_decode` (StepRequest::rows_as_decode: a step
// whose rows must have their one-token steps' bits) takes the decode form
// at any T: past kDecodeFormRows its GEMVs read the weights once per 8
// rows, slower than the tiles but exact.
bool launches_in(const Kernel& k, std::optional<int64_t> t_rows, bool rows_as_decode = false);
// The same at a bucket's symbol bindings (a map from symbol name to value).
template <class Symbols>
bool launches_at(const Kernel& k, const Symbols& symbols, bool rows_as_decode = false) {
  const auto t = symbols.find("T");
  return launches_in(k, t == symbols.end() ? std::nullopt : std::optional<int64_t>(t->second), rows_as_decode);
}

// A value that shares another's storage: reshape, view (at an element
// offset), transfers, and the arguments and results of a fused region run as
// a kernel sequence.
struct ValueAlias {
  const ir::ValueData* value = nullptr;
  const ir::ValueData* source = nullptr;
  ir::Dim offset_elems = 0;
};
struct WeightBinding {
  const ir::ValueData* value = nullptr;
  std::string weight;  // the module's weight symbol
};

// The kernels of one step function, in launch order. Ops that need no
// kernel (weight, reshape, view, transfers, return) become aliases and
// weight bindings, resolved by the executor without a launch.
struct StepKernels {
  std::string function;
  std::vector<Kernel> kernels;
  std::vector<ValueAlias> aliases;      // in definition order
  std::vector<WeightBinding> weights;
  std::vector<const ir::ValueData*> returns;
  // Kernels with distinct entries (what NVRTC must compile).
  std::vector<const Kernel*> unique() const;
};

// A generated kernel as a `vtc compile --target cuda` artifact stores it.
struct KernelSource {
  std::string entry;   // extern "C" name (unique per source)
  std::string what;    // the op it implements, for messages
  std::string source;  // CUDA C++ translation unit
};

// Checks that `stored` (an artifact's kernels of step `step.function`)
// holds exactly the distinct kernels `step` generates, source for source,
// so an artifact runs the kernels it was compiled with. Throws vtc::Error
// naming the first kernel that is missing, extra or different.
void check_stored_kernels(const StepKernels& step, const std::vector<KernelSource>& stored);

// Why a verified `fused` op runs as a sequence of its body ops' kernels
// rather than one kernel, by its kind (ir/fused_kinds.h); empty when one.
std::string why_op_by_op(const ir::Op& fused);
// Generates every kernel of `fn`, in op order.
StepKernels generate_step(const ir::Module& module, const ir::Function& fn);

}  // namespace vtc::cuda
