#include "sched/memory_plan.h"

#include <algorithm>
#include <map>

namespace spora::sched {

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, uint64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  // Events per step: frees of buffers whose last read was an earlier step
  // happen before the step's allocations.
  int32_t steps = 0;
  for (const auto& r : requests) steps = std::max({steps, r.first + 1, r.last + 1});
  std::vector<std::vector<size_t>> born(static_cast<size_t>(steps)), dies(static_cast<size_t>(steps));
  for (size_t i = 0; i < requests.size(); ++i) {
    born[static_cast<size_t>(requests[i].first)].push_back(i);
    dies[static_cast<size_t>(std::max(requests[i].first, requests[i].last))].push_back(i);
  }
  std::map<uint64_t, uint64_t> free_blocks;  // offset -> size, coalesced
  uint64_t top = 0;
  std::vector<uint64_t> block(requests.size(), 0);  // bytes each request holds
  std::vector<bool> handed_over(requests.size(), false);
  auto release = [&](uint64_t off, uint64_t size) {
    auto it = free_blocks.emplace(off, size).first;
    auto next = std::next(it);
    if (next != free_blocks.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_blocks.erase(next);
    }
    if (it != free_blocks.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_blocks.erase(it);
        it = prev;
      }
    }
    // Space at the top of the arena shrinks the arena's high-water mark
    // for future allocations.
    if (it->first + it->second == top) {
      top = it->first;
      free_blocks.erase(it);
    }
  };
  for (int32_t s = 0; s < steps; ++s) {
    // Largest first within a step, so big buffers get the best fits.
    auto& b = born[static_cast<size_t>(s)];
    std::sort(b.begin(), b.end(), [&](size_t x, size_t y) { return requests[x].bytes > requests[y].bytes; });
    for (size_t i : b) {
      const uint64_t size = std::max<uint64_t>(alignment, (requests[i].bytes + alignment - 1) / alignment * alignment);
      plan.naive_bytes += requests[i].bytes;
      const int32_t r = requests[i].reuse;
      if (r >= 0 && static_cast<size_t>(r) < i && !handed_over[static_cast<size_t>(r)] &&
          requests[static_cast<size_t>(r)].last == s && block[static_cast<size_t>(r)] >= size) {
        // In place: the input's buffer becomes this output's.
        handed_over[static_cast<size_t>(r)] = true;
        plan.offsets[i] = plan.offsets[static_cast<size_t>(r)];
        block[i] = block[static_cast<size_t>(r)];
        continue;
      }
      block[i] = size;
      auto best = free_blocks.end();
      for (auto it = free_blocks.begin(); it != free_blocks.end(); ++it)
        if (it->second >= size && (best == free_blocks.end() || it->second < best->second)) best = it;
      if (best != free_blocks.end()) {
        plan.offsets[i] = best->first;
        const uint64_t rest = best->second - size, off = best->first + size;
        free_blocks.erase(best);
        if (rest) free_blocks.emplace(off, rest);
      } else {
        plan.offsets[i] = top;
        top += size;
      }
      plan.arena_bytes = std::max(plan.arena_bytes, top);
    }
    for (size_t i : dies[static_cast<size_t>(s)])
      if (!handed_over[i]) release(plan.offsets[i], block[i]);
  }
  return plan;
}

}  // namespace spora::sched
