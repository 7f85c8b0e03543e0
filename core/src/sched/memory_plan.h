// Static memory planning: every intermediate buffer of a graph gets an offset
// in one arena per device, reused once its last reader has run.
#pragma once
#include <cstdint>
#include <vector>

namespace spora::sched {

struct BufferRequest {
  uint64_t bytes = 0;
  int32_t first = 0;  // step that writes it
  int32_t last = 0;   // last step that reads it (>= first)
  // An earlier request whose buffer this one may take over when that one's
  // last read is this one's writing step (an in-place op); -1 = none.
  int32_t reuse = -1;
};

struct MemoryPlan {
  std::vector<uint64_t> offsets;  // per request
  uint64_t arena_bytes = 0;       // the planned peak
  uint64_t naive_bytes = 0;       // sum of all requests, no reuse
};

// The smaller of two plans: greedy best-fit over steps (buffers placed when
// first written, their space back in the free list after their last read)
// and greedy by size over whole lifetimes (largest first, each at the lowest
// offset free for its lifetime). In both an in-place request takes over its
// `reuse` buffer. Offsets are `alignment`-aligned.
MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, uint64_t alignment = 256);

}  // namespace spora::sched
