#include "runtime/diff/state_snapshot.h"

#include <fmt/format.h>

#include <cstring>

#include "runtime/diff/fingerprint.h"
#include "support/error.h"

namespace vtc::diff {
namespace {

// Constant dims of `decl` from index `first` on.
std::vector<int64_t> tail_dims(const ir::StateDecl& decl, size_t first) {
  std::vector<int64_t> dims;
  for (size_t i = first; i < decl.type.shape.size(); ++i) {
    auto c = decl.type.shape[i].constant();
    if (!c) throw Error(fmt::format("snapshot: state @{} has a symbolic dim {} past the slot/page dims", decl.name, i));
    dims.push_back(*c);
  }
  return dims;
}

cpu::HostTensor paged_snapshot(const ir::StateDecl& decl, StateStore& store, StateStore::Buffer& b, int32_t slot) {
  const int64_t positions = int64_t(store.page_table(slot).size()) * store.page_size();
  const size_t row_bytes = size_t(b.row_elems * b.elem_bytes);
  cpu::HostTensor t{b.elem, {b.halves, positions}, {}};
  for (int64_t d : tail_dims(decl, 3)) t.shape.push_back(d);
  t.bytes.resize(size_t(b.halves * positions) * row_bytes);
  uint8_t* out = t.bytes.data();
  for (int half = 0; half < b.halves; ++half)
    for (int64_t p = 0; p < positions; ++p, out += row_bytes) std::memcpy(out, store.kv_row(b, slot, half, p), row_bytes);
  return t;
}

}  // namespace

std::vector<StateSnapshot> snapshot_states(const ir::Module& module, StateStore& store, int32_t slot) {
  std::vector<StateSnapshot> out;
  for (const ir::StateDecl& decl : module.states) {
    StateStore::Buffer& b = store.buffer(decl.name);
    StateSnapshot s{"@" + decl.name, {}};
    if (decl.kind == ir::StateKind::Paged) {
      s.value = paged_snapshot(decl, store, b, slot);
    } else {
      std::span<uint8_t> row = store.slot_bytes(b, slot);
      std::vector<int64_t> shape = tail_dims(decl, 1);
      if (shape.empty()) shape = {1};
      s.value = {b.elem, std::move(shape), std::vector<uint8_t>(row.begin(), row.end())};
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string format_shape(const std::vector<int64_t>& shape) {
  return shape.empty() ? "scalar" : fmt::format("{}", fmt::join(shape, "x"));
}

void print_state_fingerprints(std::FILE* out, int step, std::string_view step_kind,
                              const std::vector<StateSnapshot>& states) {
  for (const StateSnapshot& s : states)
    fmt::print(out, "fingerprint: step {} ({}) {} {} [{}] {}\n", step, step_kind, s.name, s.value.elem.name(),
               format_shape(s.value.shape), format_fingerprint(fingerprint(widen(s.value))));
}

}  // namespace vtc::diff
