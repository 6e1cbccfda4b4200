// Streams, events and graphs of the simulated device.
//
// A stream is a queue of operations run in order by its own host thread,
// so copies and launches really are asynchronous to the caller, as on a
// GPU: a host that reads pinned memory before waiting for its event, or
// reuses a buffer it gave to a copy that has not run yet, sees what it
// would see on a GPU. Following the driver's contract:
//  - a copy from pageable host memory is staged when it is issued, and a
//    copy to pageable host memory returns only once it has completed; with
//    pinned memory both are asynchronous;
//  - the null stream runs its work before returning;
//  - while a stream is capturing, its work is recorded into a graph
//    instead of run (a launch's parameters are copied at the call, as the
//    driver does); synchronizing a capturing stream, or capturing a copy
//    of pageable memory, invalidates the capture and is an error;
//  - a replayed graph enqueues the recorded operations on the stream;
//  - the first failed kernel makes the context's error sticky: every later
//    call returns it, with the message naming the kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/sim/block_runner.h"

namespace vtc::cuda::sim {

// CUresult values the simulator returns.
enum Result : int {
  kSuccess = 0,
  kInvalidValue = 1,
  kOutOfMemory = 2,
  kInvalidImage = 200,
  kInvalidHandle = 400,
  kIllegalState = 401,
  kNotFound = 500,
  kNotReady = 600,
  kIllegalAddress = 700,
  kLaunchFailed = 719,
  kCaptureUnsupported = 900,
  kCaptureInvalidated = 901,
};

struct Function {
  KernelFn fn = nullptr;
  const VtcSimParams* params = nullptr;
  std::string entry;
  const ModuleMemory* module = nullptr;
  // Profile mode: the instrumented variant, run inside profile windows.
  struct Variant {
    KernelFn fn = nullptr;
    const VtcSimParams* params = nullptr;
    const ModuleMemory* module = nullptr;
  } profiled;
};

struct Event;

struct Op {
  enum class Kind : uint8_t { Launch, CopyIn, CopyOut, CopyDevice, Memset, Record } kind = Kind::Launch;
  // Launch
  const Function* fn = nullptr;
  VtcSimDim3 grid{}, block{};
  std::vector<uint64_t> param_words;  // each parameter in its own 8-byte word
  // Copies and memset
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  std::vector<uint8_t> staged;  // a pageable source, copied at issue
  uint8_t value = 0;
  // Record
  Event* event = nullptr;
  uint64_t ticket = 0;
};

struct Graph {
  std::vector<Op> ops;
};

class Stream;

// Records `error` as the context's sticky error (the first one wins).
void set_sticky(int code, const std::string& message);
// The sticky error code (0 when none).
int sticky();
// The primary context was released for good: its sticky error goes with it.
void reset_sticky();
// The message for `code`: the sticky one, this thread's last, or CUDA's name.
const char* error_text(int code);
// Remembers a message for `code` on this thread and returns `code`.
int fail_with(int code, const std::string& message);

Stream* create_stream();
void destroy_stream(Stream* s);
// Enqueues (or, while capturing, records) `op` on `s` (null: the null
// stream, run now).
int submit(Stream* s, Op op);
int synchronize(Stream* s);
int begin_capture(Stream* s);
int end_capture(Stream* s, Graph** graph);
int launch_graph(const Graph& g, Stream* s);

Event* create_event();
void destroy_event(Event* e);
int record(Event* e, Stream* s);
int query(Event* e);
int wait(Event* e);
// cuEventElapsedTime: the simulator's host time between the two events
// (not a GPU figure: only kernel timing's plumbing uses it here).
int elapsed_ms(float* ms, Event* start, Event* end);

// Runs one operation now (the stream threads call this).
void execute(Op& op);

}  // namespace vtc::cuda::sim
