// Cooperative fibers for the simulated device: a CUDA block's threads run
// as fibers on one host thread and switch at barriers and warp
// collectives.
//
// Why not ucontext: swapcontext saves the signal mask with a system call on
// every switch, and a block reduction switches each of its threads about a
// dozen times. The switch here saves only the callee-saved registers and
// the FP control words (x86-64 System V), a few nanoseconds.
//
// A Stack is an mmap'ed region with a PROT_NONE guard page below it, so a
// kernel that overflows its stack faults instead of corrupting a neighbour.
#pragma once

#include <cstddef>

namespace vtc::cuda::sim {

class Stack {
 public:
  // `color` staggers the top by a multiple of 64 bytes below 4 KiB, so the
  // hot tops of many stacks do not all map to the same cache sets.
  Stack(size_t bytes, unsigned color);
  ~Stack();
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  void* top() const { return top_; }
  void* bottom() const;  // the lowest usable address, above the guard page
  bool contains(const void* p) const;

 private:
  void* base_ = nullptr;  // the mapping, guard page first
  size_t mapped_ = 0;
  void* top_ = nullptr;
};

// A saved execution context: the stack pointer of a suspended fiber, and
// (for AddressSanitizer builds, which must be told of every stack switch)
// the bounds of its stack.
struct Context {
  void* sp = nullptr;
  const void* stack_bottom = nullptr;
  size_t stack_size = 0;
  void* asan_fake_stack = nullptr;
};

// The calling thread's own stack as a Context's bounds (for the scheduler).
void set_native_stack(Context& ctx);
// Called first by a fiber's entry function (AddressSanitizer bookkeeping).
void fiber_started();

// Prepares `ctx` to start `entry(arg)` on `stack` at the first switch into
// it. `entry` must never return: it ends by switching away for good.
void prepare(Context& ctx, const Stack& stack, void (*entry)(void*), void* arg);

// Saves the running context in `from` and resumes `to`.
void switch_to(Context& from, const Context& to);

}  // namespace vtc::cuda::sim
