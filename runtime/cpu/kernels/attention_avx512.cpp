// AVX-512 attention kernels (placeholder; filled in by the attention task).
#include "runtime/cpu/kernels/attention_internal.h"
