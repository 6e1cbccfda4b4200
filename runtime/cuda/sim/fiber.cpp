// Fiber stacks and the context switch (see fiber.h).
#include "runtime/cuda/sim/fiber.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#error "the simulated CUDA device's fiber switch is written for x86-64"
#endif

// vtc_sim_switch(void** save_sp, void* load_sp): pushes the callee-saved
// registers and MXCSR/x87 control words, stores the stack pointer in
// *save_sp, loads load_sp and pops the same frame from it.
// vtc_sim_fiber_start: where a fresh fiber's first switch returns to;
// calls r12(r13) with the stack 16-byte aligned.
asm(R"(
  .text
  .globl vtc_sim_switch
  .hidden vtc_sim_switch
  .type vtc_sim_switch, @function
vtc_sim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size vtc_sim_switch, .-vtc_sim_switch

  .globl vtc_sim_fiber_start
  .hidden vtc_sim_fiber_start
  .type vtc_sim_fiber_start, @function
vtc_sim_fiber_start:
  movq %r13, %rdi
  callq *%r12
  ud2
  .size vtc_sim_fiber_start, .-vtc_sim_fiber_start
)");

extern "C" void vtc_sim_switch(void** save_sp, void* load_sp);
extern "C" void vtc_sim_fiber_start();

namespace vtc::cuda::sim {

namespace {
size_t page_size() {
  static const size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}
}  // namespace

Stack::Stack(size_t bytes, unsigned color) {
  const size_t page = page_size();
  mapped_ = (bytes + page - 1) / page * page + page;
  base_ = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base_ == MAP_FAILED) throw std::bad_alloc();
  mprotect(base_, page, PROT_NONE);
  top_ = static_cast<char*>(base_) + mapped_ - (color * 64 * 7) % 4096;
}

Stack::~Stack() { munmap(base_, mapped_); }

bool Stack::contains(const void* p) const {
  const auto* c = static_cast<const char*>(p);
  return c >= static_cast<const char*>(base_) && c < static_cast<const char*>(top_);
}

void prepare(Context& ctx, const Stack& stack, void (*entry)(void*), void* arg) {
  // The frame vtc_sim_switch pops, from the lowest address: control words,
  // r15, r14, r13, r12, rbx, rbp, return address. After the return the
  // stack pointer is top - 16, 16-byte aligned for the call in
  // vtc_sim_fiber_start.
  auto top = reinterpret_cast<uintptr_t>(stack.top()) & ~uintptr_t(15);
  auto* frame = reinterpret_cast<uint64_t*>(top - 80);
  const uint32_t mxcsr = 0x1f80;  // all exceptions masked, round to nearest
  const uint16_t fpucw = 0x037f;
  std::memset(frame, 0, 80);
  std::memcpy(&frame[0], &mxcsr, 4);
  std::memcpy(reinterpret_cast<char*>(&frame[0]) + 4, &fpucw, 2);
  frame[1] = 0;                                          // r15
  frame[2] = 0;                                          // r14
  frame[3] = reinterpret_cast<uint64_t>(arg);            // r13
  frame[4] = reinterpret_cast<uint64_t>(entry);          // r12
  frame[5] = 0;                                          // rbx
  frame[6] = 0;                                          // rbp
  frame[7] = reinterpret_cast<uint64_t>(&vtc_sim_fiber_start);  // return address
  ctx.sp = frame;
  ctx.stack_bottom = stack.bottom();
  ctx.stack_size = size_t(static_cast<char*>(stack.top()) - static_cast<char*>(stack.bottom()));
}

void* Stack::bottom() const { return static_cast<char*>(base_) + page_size(); }

#if defined(__SANITIZE_ADDRESS__)
void switch_to(Context& from, const Context& to) {
  __sanitizer_start_switch_fiber(&from.asan_fake_stack, to.stack_bottom, to.stack_size);
  vtc_sim_switch(&from.sp, to.sp);
  __sanitizer_finish_switch_fiber(from.asan_fake_stack, nullptr, nullptr);
}
void fiber_started() { __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr); }
#else
void switch_to(Context& from, const Context& to) { vtc_sim_switch(&from.sp, to.sp); }
void fiber_started() {}
#endif

void set_native_stack(Context& ctx) {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void* addr = nullptr;
  size_t size = 0;
  pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  ctx.stack_bottom = addr;
  ctx.stack_size = size;
}

}  // namespace vtc::cuda::sim
