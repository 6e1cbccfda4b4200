// The CUDA cost model's predictions (see cost_model.h for the algorithm).
#include "runtime/cuda/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "runtime/cuda/sim/kernel_abi.h"
#include "support/error.h"

namespace vtc::cuda {
namespace {

constexpr double kSector = 32;
// An SM's L1 serves 128 bytes (4 sectors) per clock: a request touching
// 32 sectors occupies it 8 clocks (why uncoalesced loads cost).
constexpr double kL1SectorsPerClock = 4;

std::optional<int64_t> shape_symbol(std::string_view name, const void* env) {
  const auto& shape = *static_cast<const StepShape*>(env);
  auto it = shape.find(std::string(name));
  if (it == shape.end()) return std::nullopt;
  return it->second;
}

double elements(const ir::TensorType& t, const StepShape& shape) {
  double n = 1;
  for (const ir::Dim& d : t.shape) n *= double(d.evaluate(shape_symbol, &shape).value_or(1));
  return n;
}

double last_dim(const ir::TensorType& t, const StepShape& shape) {
  return t.shape.empty() ? 1 : double(t.shape.back().evaluate(shape_symbol, &shape).value_or(1));
}

// FP32 work of an op, from the IR: 2 flops per multiply-add of a matmul,
// of attention's two products and of an MoE's expert matmuls; one per
// output element for everything else (norms and softmaxes do a few, a
// copy none: an estimate of the order, not a count).
double op_flops(const ir::Op& op, const StepShape& shape) {
  if (op.results.empty()) return 0;
  const std::string_view m = op.mnemonic();
  const double out = elements(op.results[0].type(), shape);
  if (m == "matmul") return 2 * out * last_dim(op.operands[0].type(), shape);
  if (m == "attention") {
    const auto keys = shape.count("KEYS") ? double(shape.at("KEYS")) : 1.0;
    return 4 * elements(op.operands[0].type(), shape) * keys;
  }
  if (m == "moe_ffn") {
    double rows = 0, per_row = 0;
    for (const auto& v : op.operands) {
      const auto& t = v.type();
      if (t.elem.is_integer() && rows == 0) rows = elements(t, shape);  // the chosen experts, [T x k]
      if (t.rank() == 3 && t.shape[1].is_constant() && t.shape[2].is_constant())
        per_row += double(t.shape[1].evaluate(shape_symbol, &shape).value_or(1)) *
                   double(t.shape[2].evaluate(shape_symbol, &shape).value_or(1));
    }
    return 2 * std::max(rows, 1.0) * per_row;
  }
  if (m == "fused" && op.body) {
    double sum = 0;
    for (const auto& inner : op.body->ops) sum += op_flops(*inner, shape);
    return sum;
  }
  return out;
}


// Whether a kernel reads a weight (a per-layer one, blk.N, when
// `layer_only`), directly or through aliases (a reshaped or viewed weight).
bool reads_weight(const Kernel& k, const StepKernels& step, bool layer_only) {
  for (const KernelArg& a : k.args) {
    if (a.kind != KernelArg::Kind::Value) continue;
    const ir::ValueData* v = a.value;
    for (size_t hops = 0; hops <= step.aliases.size(); ++hops) {
      auto alias = std::find_if(step.aliases.begin(), step.aliases.end(),
                                [&](const ValueAlias& x) { return x.value == v; });
      if (alias == step.aliases.end()) break;
      v = alias->source;
    }
    for (const WeightBinding& w : step.weights)
      if (w.value == v && (!layer_only || w.weight.rfind("blk.", 0) == 0)) return true;
  }
  return false;
}

int blocks_per_sm(const VtcSimLaunchProfile& r, const GpuSpec& gpu) {
  const double threads = double(r.block[0]) * r.block[1] * r.block[2];
  double n = std::min<double>(gpu.max_blocks_sm, std::floor(gpu.max_threads_sm / std::max(threads, 1.0)));
  if (r.shared_bytes > 0) n = std::min(n, std::floor(gpu.shared_bytes_sm / double(r.shared_bytes)));
  return int(std::max(n, 0.0));
}

// Memory and work of one record, scaled for sampling.
void count(KernelCost& k, const VtcSimLaunchProfile& r, const GpuSpec& gpu) {
  const double scale = r.sampled_blocks ? double(r.total_blocks) / double(r.sampled_blocks) : 0;
  double far = 0;  // re-touched sectors beyond the L2's reach
  for (int b = 0; b < VTC_SIM_REUSE_BUCKETS; ++b) {
    const double mid = VTC_SIM_REUSE_BASE * std::exp2((b + 0.5) / 4.0);
    if (b > 0 && mid >= gpu.l2_bytes) far += double(r.reuse[b]);
  }
  k.requests = scale * double(r.load_requests + r.store_requests);
  k.sectors = scale * double(r.load_sectors + r.store_sectors);
  k.bytes_requested = scale * double(r.load_bytes + r.store_bytes);
  k.l2_bytes = scale * double(r.l1_miss_sectors + r.store_sectors) * kSector;
  k.compulsory_bytes = scale * double(r.distinct_sectors) * kSector;
  k.dram_bytes = scale * (double(r.first_load_sectors + r.first_store_sectors) + far) * kSector;
  k.shared_requests = scale * double(r.shared_requests);
  k.shared_wavefronts = scale * double(r.shared_wavefronts);
  k.shared_conflicts = scale * double(r.shared_wavefronts - r.shared_ideal_wavefronts);
  k.sfu = scale * double(r.work[VTC_SIM_WORK_SFU]);
  k.dp4a = scale * double(r.work[VTC_SIM_WORK_DP4A]);
  k.mma_f16 = scale * double(r.work[VTC_SIM_WORK_MMA_F16] + r.work[VTC_SIM_WORK_MMA_BF16]) / 32;
  k.mma_s8 = scale * (double(r.work[VTC_SIM_WORK_MMA_S8]) + 0.5 * double(r.work[VTC_SIM_WORK_MMA_S8_K16])) / 32;
  k.shuffles = scale * double(r.shuffles);
  k.barriers = scale * double(r.block_barriers);
}

// The roofline time of one launch.
void price(KernelCost& k, const VtcSimLaunchProfile& r, const GpuSpec& gpu, bool in_graph) {
  k.blocks = r.total_blocks;
  k.sampled_blocks = r.sampled_blocks;
  k.threads_per_block = uint64_t(r.block[0]) * r.block[1] * r.block[2];
  k.blocks_per_sm = blocks_per_sm(r, gpu);
  const double slots = double(std::max(k.blocks_per_sm, 1)) * gpu.sms;
  k.waves = double(k.blocks) / slots;
  // The fraction of the machine the grid keeps busy: a grid smaller than
  // one block per SM leaves SMs idle; beyond one wave, the last partial
  // wave idles some. (Latency hiding within an SM is not modelled.)
  const double used = k.blocks < uint64_t(gpu.sms) ? double(k.blocks) / gpu.sms
                      : k.waves > 1                ? double(k.blocks) / (std::ceil(k.waves) * slots)
                                                   : 1.0;
  const double fraction = std::clamp(used, 1e-6, 1.0);
  const double per_clock = gpu.sms * gpu.clock_hz;
  const std::pair<const char*, double> terms[] = {
      {"dram", k.dram_bytes / gpu.hbm_bytes_per_s},
      {"l2", k.l2_bytes / gpu.l2_bytes_per_s},
      {"l1", k.sectors / (kL1SectorsPerClock * per_clock)},
      {"shared", k.shared_wavefronts / per_clock},
      {"fp32", k.fp32_flops / gpu.fp32_flops},
      {"sfu", k.sfu / (gpu.sfu_per_clk_sm * per_clock)},
      {"dp4a", k.dp4a / (gpu.dp4a_per_clk_sm * per_clock)},
      {"mma", (k.mma_f16 * 4096) / gpu.f16_mma_flops + (k.mma_s8 * 8192) / gpu.s8_mma_ops},
      {"shuffle", k.shuffles / (gpu.shuffles_per_clk_sm * per_clock)},
  };
  double worst = 0;
  k.bound = "launch";
  for (const auto& [name, t] : terms)
    if (t / fraction > worst) worst = t / fraction, k.bound = name;
  const double launch = in_graph ? gpu.graph_launch_s : gpu.launch_s;
  if (worst < launch) k.bound = "launch";
  k.seconds = worst + launch;
}

}  // namespace

std::string kernel_family(const std::string& entry) {
  const size_t cut = entry.rfind('_');
  return cut != std::string::npos && entry.size() - cut == 17 ? entry.substr(0, cut) : entry;
}

StepCost predict_step(std::string step, const VtcSimProfile& profile, const StepKernels* step_kernels,
                      const StepShape& shape, const GpuSpec& gpu, double weight_bytes, double layer_scale) {
  StepCost s;
  s.step = std::move(step);
  s.summary = profile;
  s.summary.records = nullptr;
  s.layer_scale = layer_scale;
  // The kernels this shape's bucket launches (RowsGuard), in launch order.
  std::vector<const Kernel*> launched;
  if (step_kernels)
    for (const Kernel& k : step_kernels->kernels)
      if (launches_at(k, shape)) launched.push_back(&k);
  const size_t n = launched.size();
  // The layers span: from the first to the last kernel reading a blk.N
  // weight, and the weightless kernels after it (the last residual add)
  // up to the next kernel that reads a weight (the output norm or head).
  size_t first_layer = n, last_layer = 0;
  for (size_t i = 0; i < n; ++i)
    if (reads_weight(*launched[i], *step_kernels, true)) {
      first_layer = std::min(first_layer, i);
      last_layer = i;
    }
  size_t next = last_layer + 1;
  while (next < n && !reads_weight(*launched[next], *step_kernels, false)) ++next;
  if (first_layer < n && next < n) last_layer = next - 1;
  const bool in_graph = profile.graph_launches > 0;
  // Records map to the step's launches in order; a launch the step does
  // not own (device drafting's spec_rows and spec_accept around a verify
  // step) is priced from its record alone and does not advance the cursor.
  size_t cursor = 0;
  for (uint64_t i = 0; i < profile.launches; ++i) {
    const VtcSimLaunchProfile& r = profile.records[i];
    KernelCost k;
    k.entry = r.entry;
    k.family = kernel_family(k.entry);
    if (n > 0 && launched[cursor % n]->entry == k.entry) {
      const size_t at = cursor++ % n;
      k.kernel = launched[at];
      k.what = k.kernel->what;
      k.in_layers = at >= first_layer && at <= last_layer;
      if (k.kernel->fp32_flops)
        k.fp32_flops = double(k.kernel->fp32_flops->evaluate(shape_symbol, &shape).value_or(0));
      else if (k.kernel->op)
        k.fp32_flops = op_flops(*k.kernel->op, shape);
    }
    count(k, r, gpu);
    price(k, r, gpu, in_graph);
    const double weight = k.in_layers ? layer_scale : 1;
    s.kernel_seconds += weight * k.seconds;
    s.kernels.push_back(std::move(k));
  }
  const double copy_bytes = double(profile.bytes_in + profile.bytes_out);
  const double copies = double(profile.copies_in + profile.copies_out);
  s.copy_seconds = copy_bytes / gpu.pcie_bytes_per_s + copies * 2e-6;
  s.seconds = s.kernel_seconds + s.copy_seconds;
  s.weight_bytes = weight_bytes;
  s.roofline_seconds = weight_bytes / gpu.hbm_bytes_per_s;
  return s;
}

namespace {

struct FamilyRow {
  std::string family;
  double launches = 0, dram = 0, compulsory = 0, requests = 0, sectors = 0, conflicts = 0, shared_wavefronts = 0;
  double fp32 = 0, sfu = 0, dp4a = 0, mma = 0, shuffles = 0, seconds = 0;
  std::map<std::string, double> bound_seconds;
  std::string bound() const {
    auto it = std::max_element(bound_seconds.begin(), bound_seconds.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
    return it == bound_seconds.end() ? "" : it->first;
  }
};

std::vector<FamilyRow> families(const StepCost& s) {
  std::map<std::string, FamilyRow> rows;
  for (const KernelCost& k : s.kernels) {
    const double w = k.in_layers ? s.layer_scale : 1;
    FamilyRow& r = rows[k.family];
    r.family = k.family;
    r.launches += w;
    r.dram += w * k.dram_bytes;
    r.compulsory += w * k.compulsory_bytes;
    r.requests += w * k.requests;
    r.sectors += w * k.sectors;
    r.conflicts += w * k.shared_conflicts;
    r.shared_wavefronts += w * k.shared_wavefronts;
    r.fp32 += w * k.fp32_flops;
    r.sfu += w * k.sfu;
    r.dp4a += w * k.dp4a;
    r.mma += w * (k.mma_f16 + k.mma_s8);
    r.shuffles += w * k.shuffles;
    r.seconds += w * k.seconds;
    r.bound_seconds[k.bound] += w * k.seconds;
  }
  std::vector<FamilyRow> out;
  for (auto& [name, r] : rows) out.push_back(std::move(r));
  std::sort(out.begin(), out.end(), [](const FamilyRow& a, const FamilyRow& b) { return a.seconds > b.seconds; });
  return out;
}

std::string si(double v) {
  const char* units[] = {"", "k", "M", "G", "T"};
  int u = 0;
  while (std::fabs(v) >= 1000 && u < 4) v /= 1000, ++u;
  return u == 0 ? fmt::format("{:.0f}", v) : fmt::format("{:.2f}{}", v, units[u]);
}

std::string mix(const FamilyRow& r) {
  std::string s = "fp32 " + si(r.fp32);
  if (r.sfu > 0) s += ", sfu " + si(r.sfu);
  if (r.dp4a > 0) s += ", dp4a " + si(r.dp4a);
  if (r.mma > 0) s += ", mma " + si(r.mma);
  if (r.shuffles > 0) s += ", shfl " + si(r.shuffles);
  if (r.conflicts > 0) s += ", bank conflicts " + si(r.conflicts);
  return s;
}

}  // namespace

std::string format_step(const StepCost& s, const GpuSpec& gpu) {
  uint64_t sampled = 0, blocks = 0;
  for (const KernelCost& k : s.kernels) blocks += k.blocks, sampled += k.sampled_blocks;
  std::string out = fmt::format(
      "{} on {} (PREDICTED by the cost model from the simulated device's counts{}{})\n", s.step, gpu.title,
      s.layer_scale != 1 ? fmt::format(", per-layer kernels x{:.1f}", s.layer_scale) : "",
      sampled < blocks ? fmt::format(", {} of {} blocks run and counted, scaled", sampled, blocks) : "");
  out += "| kernel family | launches | DRAM bytes | compulsory | sectors/req | instruction mix | predicted us | bound |\n";
  out += "|---|---|---|---|---|---|---|---|\n";
  for (const FamilyRow& r : families(s))
    out += fmt::format("| {} | {:.0f} | {}B | {}B | {:.1f} | {} | {:.1f} | {} |\n", r.family, r.launches, si(r.dram),
                       si(r.compulsory), r.requests > 0 ? r.sectors / r.requests : 0.0, mix(r), r.seconds * 1e6,
                       r.bound());
  const VtcSimProfile& p = s.summary;
  out += fmt::format(
      "step: predicted {:.1f} us ({:.1f} us kernels, {:.1f} us copies: {} in / {} out, {}B, {} pageable); "
      "{} graph launch(es), {} host wait(s)\n",
      s.seconds * 1e6, s.kernel_seconds * 1e6, s.copy_seconds * 1e6, p.copies_in, p.copies_out,
      si(double(p.bytes_in + p.bytes_out)), p.pageable_copies, p.graph_launches, p.host_waits);
  if (s.weight_bytes > 0)
    out += fmt::format("roofline: {}B of weights / {:.2f} TB/s = {:.1f} us; predicted step is {:.1f}x the roofline "
                       "({:.0f}% of HBM bandwidth)\n",
                       si(s.weight_bytes), gpu.hbm_bytes_per_s / 1e12, s.roofline_seconds * 1e6,
                       s.seconds / s.roofline_seconds, 100 * s.roofline_seconds / s.seconds);
  return out;
}

std::string step_json(const StepCost& s, const GpuSpec& gpu) {
  nlohmann::json j = {{"step", s.step},
                      {"gpu", gpu.name},
                      {"predicted", true},
                      {"predicted_us", s.seconds * 1e6},
                      {"kernel_us", s.kernel_seconds * 1e6},
                      {"copy_us", s.copy_seconds * 1e6},
                      {"roofline_us", s.roofline_seconds * 1e6},
                      {"weight_bytes", s.weight_bytes},
                      {"layer_scale", s.layer_scale},
                      {"graph_launches", s.summary.graph_launches},
                      {"host_waits", s.summary.host_waits},
                      {"copies_in", s.summary.copies_in},
                      {"copies_out", s.summary.copies_out},
                      {"pageable_copies", s.summary.pageable_copies}};
  for (const FamilyRow& r : families(s))
    j["families"].push_back({{"family", r.family},
                             {"launches", r.launches},
                             {"dram_bytes", r.dram},
                             {"compulsory_bytes", r.compulsory},
                             {"sectors_per_request", r.requests > 0 ? r.sectors / r.requests : 0.0},
                             {"shared_bank_conflicts", r.conflicts},
                             {"fp32_flops", r.fp32},
                             {"sfu", r.sfu},
                             {"dp4a", r.dp4a},
                             {"mma", r.mma},
                             {"shuffles", r.shuffles},
                             {"predicted_us", r.seconds * 1e6},
                             {"bound", r.bound()}});
  for (const KernelCost& k : s.kernels)
    j["launches"].push_back({{"entry", k.entry},
                             {"what", k.what},
                             {"in_layers", k.in_layers},
                             {"blocks", k.blocks},
                             {"threads_per_block", k.threads_per_block},
                             {"blocks_per_sm", k.blocks_per_sm},
                             {"waves", k.waves},
                             {"requests", k.requests},
                             {"sectors", k.sectors},
                             {"bytes_requested", k.bytes_requested},
                             {"dram_bytes", k.dram_bytes},
                             {"l2_bytes", k.l2_bytes},
                             {"compulsory_bytes", k.compulsory_bytes},
                             {"shared_requests", k.shared_requests},
                             {"shared_wavefronts", k.shared_wavefronts},
                             {"shared_bank_conflicts", k.shared_conflicts},
                             {"fp32_flops", k.fp32_flops},
                             {"sfu", k.sfu},
                             {"dp4a", k.dp4a},
                             {"shuffles", k.shuffles},
                             {"barriers", k.barriers},
                             {"predicted_us", k.seconds * 1e6},
                             {"bound", k.bound}});
  return j.dump(1);
}

}  // namespace vtc::cuda
