// Streams, events, graphs and errors of the simulated device (streams.h).
#include "runtime/cuda/sim/streams.h"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "runtime/cuda/sim/memory.h"
#include "runtime/cuda/sim/profiler.h"

namespace vtc::cuda::sim {

// One lock and one condition for all streams and events: waits are rare
// and short next to the kernels they wait for. Never destroyed: when a
// failure leaves a context alive at exit, its streams' workers still wait
// on the condition, and destroying a condition with waiters blocks forever
// (glibc), so a failing test would hang until its timeout.
namespace {
std::mutex& g_mu = *new std::mutex;
std::condition_variable& g_cv = *new std::condition_variable;
int g_sticky = 0;
std::string g_sticky_message;
thread_local int t_last_code = 0;
thread_local std::string t_last_message;
}  // namespace

struct Event {
  uint64_t recorded = 0, reached = 0;
  double reached_ms = 0;  // host time when `reached` last advanced (cuEventElapsedTime)
};

class Stream {
 public:
  Stream() : worker_([this] { serve(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(g_mu);
      stopping_ = true;
    }
    g_cv.notify_all();
    worker_.join();
  }
  void push(Op op) {
    {
      std::lock_guard<std::mutex> lock(g_mu);
      queue_.push_back(std::move(op));
      ++submitted_;
    }
    g_cv.notify_all();
  }
  // Waits for everything submitted so far.
  void drain() {
    std::unique_lock<std::mutex> lock(g_mu);
    const uint64_t target = submitted_;
    g_cv.wait(lock, [&] { return finished_ >= target; });
  }
  std::unique_ptr<Graph> capture;
  bool capture_invalidated = false;

 private:
  void serve() {
    for (;;) {
      Op op;
      {
        std::unique_lock<std::mutex> lock(g_mu);
        g_cv.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      execute(op);
      {
        std::lock_guard<std::mutex> lock(g_mu);
        ++finished_;
      }
      g_cv.notify_all();
    }
  }
  std::deque<Op> queue_;
  uint64_t submitted_ = 0, finished_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

void set_sticky(int code, const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_sticky) return;
  g_sticky = code;
  g_sticky_message = message;
}

void reset_sticky() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_sticky = 0;
}

int sticky() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_sticky;
}

int fail_with(int code, const std::string& message) {
  t_last_code = code;
  t_last_message = message;
  return code;
}

const char* error_text(int code) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    // The sticky message lives as long as the process (it is never reset).
    if (code == g_sticky) return g_sticky_message.c_str();
  }
  if (code == t_last_code) return t_last_message.c_str();
  switch (code) {
    case kSuccess: return "no error";
    case kInvalidValue: return "invalid argument";
    case kOutOfMemory: return "out of memory";
    case kInvalidImage: return "device kernel image is invalid";
    case kInvalidHandle: return "invalid resource handle";
    case kIllegalState: return "the operation is not permitted in this state";
    case kNotFound: return "named symbol not found";
    case kNotReady: return "device not ready";
    case kIllegalAddress: return "an illegal memory access was encountered";
    case kLaunchFailed: return "unspecified launch failure";
    case kCaptureUnsupported: return "operation not permitted when stream is capturing";
    case kCaptureInvalidated: return "operation failed due to a previous error during capture";
    default: return "unknown error";
  }
}

namespace {

void run_launch(Op& op) {
  const VtcSimParams* info = op.fn->params;
  const unsigned n = info ? info->count : 0;
  std::vector<void*> params(n);
  for (unsigned i = 0; i < n; ++i) {
    params[i] = &op.param_words[i];
    if (!info->is_pointer[i]) continue;
    const uintptr_t p = uintptr_t(op.param_words[i]);
    if (p && !find_allocation(p, 1)) {
      set_sticky(kIllegalAddress, fmt::format("kernel {}: pointer parameter `{}` = {:#x} is {} (simulated device)",
                                              op.fn->entry, info->names[i], p, describe_address(p)));
      return;
    }
  }
  Launch l{op.fn->fn, op.fn->entry, info, params.data(), op.grid, op.block, op.fn->module};
  if (op.fn->profiled.fn && profile_window_open()) {  // profile mode: the instrumented variant
    l.fn = op.fn->profiled.fn;
    l.param_info = op.fn->profiled.params;
    l.module = op.fn->profiled.module;
  }
  static const bool trace = env_flag("VTC_CUDA_SIM_TRACE");
  if (trace)
    std::fprintf(stderr, "vtc-sim: launch %s grid (%u,%u,%u) block (%u,%u,%u)\n", op.fn->entry.c_str(), op.grid.x,
                 op.grid.y, op.grid.z, op.block.x, op.block.y, op.block.z);
  std::string error = run_grid(l);
  if (!error.empty())
    set_sticky(error.find("invalid memory access") != std::string::npos ? kIllegalAddress : kLaunchFailed,
               error + " (simulated device)");
}

}  // namespace

void execute(Op& op) {
  if (sticky()) return;  // a failed context runs nothing more
  switch (op.kind) {
    case Op::Kind::Launch: run_launch(op); break;
    case Op::Kind::CopyIn:
      note_copy(0, op.bytes, !op.staged.empty());
      std::memcpy(op.dst, op.staged.empty() ? op.src : op.staged.data(), op.bytes);
      break;
    case Op::Kind::CopyOut:
      note_copy(1, op.bytes, !is_pinned(op.dst, op.bytes));
      std::memcpy(op.dst, op.src, op.bytes);
      break;
    case Op::Kind::CopyDevice:
      // Not in the profile: its summary counts only what crosses the bus.
      std::memcpy(op.dst, op.src, op.bytes);
      break;
    case Op::Kind::Memset:
      note_copy(2, op.bytes, false);
      std::memset(op.dst, op.value, op.bytes);
      break;
    case Op::Kind::Record: {
      std::lock_guard<std::mutex> lock(g_mu);
      op.event->reached = std::max(op.event->reached, op.ticket);
      op.event->reached_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
      break;
    }
  }
}

Stream* create_stream() { return new Stream(); }
void destroy_stream(Stream* s) {
  if (s) s->drain();
  delete s;
}

int submit(Stream* s, Op op) {
  if (int e = sticky()) return e;
  if (s && s->capture) {
    s->capture->ops.push_back(std::move(op));
    return kSuccess;
  }
  if (!s) {
    execute(op);
    return sticky();
  }
  const bool wait_for_it = op.kind == Op::Kind::CopyOut && !is_pinned(op.dst, op.bytes);
  s->push(std::move(op));
  if (wait_for_it) {  // a copy to pageable memory returns once done
    note_host_wait();
    s->drain();
  }
  return sticky();
}

int synchronize(Stream* s) {
  if (s && s->capture) {
    s->capture_invalidated = true;
    return fail_with(kCaptureUnsupported, "cuStreamSynchronize on a stream that is capturing a graph (simulated device)");
  }
  note_host_wait();
  if (s) s->drain();
  return sticky();
}

int begin_capture(Stream* s) {
  if (!s) return fail_with(kIllegalState, "the null stream cannot capture a graph");
  if (s->capture) return fail_with(kIllegalState, "the stream is already capturing");
  s->capture = std::make_unique<Graph>();
  s->capture_invalidated = false;
  return kSuccess;
}

int end_capture(Stream* s, Graph** graph) {
  *graph = nullptr;
  if (!s || !s->capture) return fail_with(kIllegalState, "cuStreamEndCapture on a stream that is not capturing");
  std::unique_ptr<Graph> g = std::move(s->capture);
  if (s->capture_invalidated)
    return fail_with(kCaptureInvalidated, "the capture was invalidated by an operation not permitted while capturing");
  *graph = g.release();
  return kSuccess;
}

int launch_graph(const Graph& g, Stream* s) {
  note_graph_launch();
  for (const Op& op : g.ops)
    if (int e = submit(s, op)) return e;
  return kSuccess;
}

Event* create_event() { return new Event(); }
void destroy_event(Event* e) { delete e; }

int record(Event* e, Stream* s) {
  Op op;
  op.kind = Op::Kind::Record;
  op.event = e;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    op.ticket = ++e->recorded;
  }
  return submit(s, std::move(op));
}

int query(Event* e) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_sticky) return g_sticky;
  return e->reached >= e->recorded ? kSuccess : kNotReady;
}

int elapsed_ms(float* ms, Event* start, Event* end) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (start->reached < start->recorded || end->reached < end->recorded) return kNotReady;
  *ms = float(end->reached_ms - start->reached_ms);
  return kSuccess;
}

int wait(Event* e) {
  note_host_wait();
  std::unique_lock<std::mutex> lock(g_mu);
  g_cv.wait(lock, [&] { return e->reached >= e->recorded || g_sticky; });
  return g_sticky;
}

}  // namespace vtc::cuda::sim
