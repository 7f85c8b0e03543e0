#include "sched/memory_plan.h"

#include <algorithm>
#include <map>

namespace spora::sched {

namespace {

uint64_t aligned(uint64_t bytes, uint64_t alignment) {
  return std::max<uint64_t>(alignment, (bytes + alignment - 1) / alignment * alignment);
}

// Online: buffers placed in step order, best fit among the free blocks.
MemoryPlan best_fit_online(const std::vector<BufferRequest>& requests, uint64_t alignment) {
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
      const uint64_t size = aligned(requests[i].bytes, alignment);
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

// Offline, greedy by size: in-place chains become one buffer, then the
// largest buffers are placed first, each at the lowest offset where it
// overlaps no placed buffer alive at the same time. With all lifetimes
// known this packs long-lived large buffers together, where the online
// order can leave a large hole under a long-lived small buffer.
MemoryPlan greedy_by_size(const std::vector<BufferRequest>& requests, uint64_t alignment) {
  MemoryPlan plan;
  const size_t n = requests.size();
  plan.offsets.assign(n, 0);
  struct Group {
    uint64_t size;
    int32_t first, last;
  };
  std::vector<Group> groups;
  std::vector<size_t> group_of(n);
  std::vector<bool> handed_over(n, false);
  for (size_t i = 0; i < n; ++i) {
    const BufferRequest& q = requests[i];
    plan.naive_bytes += q.bytes;
    const uint64_t size = aligned(q.bytes, alignment);
    const int32_t last = std::max(q.first, q.last);
    const int32_t r = q.reuse;
    if (r >= 0 && static_cast<size_t>(r) < i && !handed_over[static_cast<size_t>(r)] &&
        requests[static_cast<size_t>(r)].last == q.first) {
      Group& g = groups[group_of[static_cast<size_t>(r)]];
      if (g.size >= size) {
        handed_over[static_cast<size_t>(r)] = true;
        group_of[i] = group_of[static_cast<size_t>(r)];
        g.last = std::max(g.last, last);
        continue;
      }
    }
    group_of[i] = groups.size();
    groups.push_back(Group{size, q.first, last});
  }
  std::vector<size_t> order(groups.size());
  for (size_t g = 0; g < order.size(); ++g) order[g] = g;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return groups[a].size > groups[b].size; });
  std::vector<uint64_t> offset(groups.size(), 0);
  std::vector<size_t> placed;
  std::vector<std::pair<uint64_t, uint64_t>> busy;  // [offset, end) of placed groups alive meanwhile
  for (size_t g : order) {
    busy.clear();
    for (size_t o : placed)
      if (groups[o].first <= groups[g].last && groups[g].first <= groups[o].last)
        busy.emplace_back(offset[o], offset[o] + groups[o].size);
    std::sort(busy.begin(), busy.end());
    uint64_t at = 0;
    for (const auto& [b, e] : busy) {
      if (b >= at + groups[g].size) break;  // fits in the gap below this one
      at = std::max(at, e);
    }
    offset[g] = at;
    plan.arena_bytes = std::max(plan.arena_bytes, at + groups[g].size);
    placed.push_back(g);
  }
  for (size_t i = 0; i < n; ++i) plan.offsets[i] = offset[group_of[i]];
  return plan;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, uint64_t alignment) {
  MemoryPlan online = best_fit_online(requests, alignment);
  MemoryPlan offline = greedy_by_size(requests, alignment);
  return offline.arena_bytes < online.arena_bytes ? offline : online;
}

}  // namespace spora::sched
