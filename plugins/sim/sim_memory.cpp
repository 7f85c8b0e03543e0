// First-fit arena allocator with free-block coalescing (see sim_memory.h).
#include "sim_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>

#include "error.h"

namespace spora::sim {
namespace {

using spora::plugin::make_error;

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string prefix(int32_t device) { return "[sim] device " + std::to_string(device) + ": "; }

}  // namespace

spora_plugin_error_t* Arena::create(int32_t device, uint64_t bytes, Arena** out) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    return make_error(SPORA_PLUGIN_OUT_OF_MEMORY, prefix(device) + "cannot reserve a " +
                                                      std::to_string(bytes) + "-byte arena: mmap failed: " +
                                                      std::strerror(err) + " (lower sim.memory_bytes)");
  }
  try {
    *out = new Arena(device, static_cast<char*>(p), bytes);
  } catch (...) {
    ::munmap(p, bytes);
    throw;  // the table function's guard reports it
  }
  return nullptr;
}

Arena::Arena(int32_t device, char* host, uint64_t bytes)
    : device_(device),
      host_(host),
      bytes_(bytes),
      tag_base_(kDeviceAddressBase + static_cast<uint64_t>(device) * kDeviceAddressSpan + kDeviceAddressGuard),
      free_bytes_(bytes) {
  free_.emplace(0, bytes);
}

Arena::~Arena() { ::munmap(host_, bytes_); }

spora_plugin_error_t* Arena::allocate(size_t size, uint64_t* out_address) {
  std::lock_guard<std::mutex> lock(mu_);
  // Reject before rounding so a huge request cannot overflow the round-up.
  const bool fits = size <= bytes_;
  const size_t need = fits ? (size == 0 ? kAlignment : (size + kAlignment - 1) / kAlignment * kAlignment) : 0;
  if (fits) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < need) continue;
      const size_t offset = it->first;
      const size_t left = it->second - need;
      free_.erase(it);
      if (left > 0) free_.emplace(offset + need, left);
      live_.emplace(offset, Block{size, need});
      free_bytes_ -= need;
      allocated_ += size;
      reserved_ += need;
      peak_allocated_ = std::max(peak_allocated_, allocated_);
      peak_reserved_ = std::max(peak_reserved_, reserved_);
      *out_address = address_of(offset);
      return nullptr;
    }
  }
  size_t largest = 0;
  for (const auto& [offset, len] : free_) largest = len > largest ? len : largest;
  return make_error(SPORA_PLUGIN_OUT_OF_MEMORY,
                    prefix(device_) + "out of memory: requested " + std::to_string(size) + " bytes, " +
                        std::to_string(free_bytes_) + " of " + std::to_string(bytes_) +
                        " bytes free (largest free block " + std::to_string(largest) + " bytes)");
}

spora_plugin_error_t* Arena::release(uint64_t address) {
  std::lock_guard<std::mutex> lock(mu_);
  if (address < tag_base_ || address - tag_base_ >= bytes_) {
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                      prefix(device_) + "mem_free of " + hex(address) + ", which is not a device address of this device");
  }
  const size_t offset = address - tag_base_;
  auto it = live_.find(offset);
  if (it == live_.end()) {
    auto after = live_.upper_bound(offset);
    if (after != live_.begin()) {
      auto owner = std::prev(after);
      if (offset < owner->first + owner->second.reserved) {
        return make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                          prefix(device_) + "mem_free of " + hex(address) + ", which points inside the allocation at " +
                              hex(address_of(owner->first)) + "; free the address mem_alloc returned");
      }
    }
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, prefix(device_) + "mem_free of " + hex(address) +
                                                         ", which is not a live allocation (double free?)");
  }
  size_t start = offset;
  size_t len = it->second.reserved;
  allocated_ -= it->second.requested;
  reserved_ -= len;
  live_.erase(it);
  free_bytes_ += len;

  // Coalesce with the free neighbours so free_ never holds adjacent blocks.
  auto next = free_.lower_bound(start);
  if (next != free_.end() && start + len == next->first) {
    len += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      len += prev->second;
      free_.erase(prev);
    }
  }
  free_.emplace(start, len);
  return nullptr;
}

void Arena::stats(spora_memory_stats_t* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  using S = spora_memory_stats_t;
  if (SPORA_STRUCT_HAS(out, S, allocated_bytes)) out->allocated_bytes = allocated_;
  if (SPORA_STRUCT_HAS(out, S, peak_allocated_bytes)) out->peak_allocated_bytes = peak_allocated_;
  if (SPORA_STRUCT_HAS(out, S, reserved_bytes)) out->reserved_bytes = reserved_;
  if (SPORA_STRUCT_HAS(out, S, peak_reserved_bytes)) out->peak_reserved_bytes = peak_reserved_;
}

void Arena::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_allocated_ = allocated_;
  peak_reserved_ = reserved_;
}

spora_plugin_error_t* Arena::translate(uint64_t address, size_t size, const char* what, void** out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (address >= tag_base_ && address - tag_base_ < bytes_) {
    const size_t offset = address - tag_base_;
    // The allocation containing `offset` is the last one starting at or before it.
    auto after = live_.upper_bound(offset);
    if (after != live_.begin()) {
      const auto& [start, block] = *std::prev(after);
      const size_t into = offset - start;
      // `into == requested` with size 0 is the one-past-the-end address.
      if (into <= block.requested && size <= block.requested - into) {
        *out = host_ + offset;
        return nullptr;
      }
      if (into < block.reserved) {
        return make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                          prefix(device_) + what + " range [" + hex(address) + ", +" + std::to_string(size) +
                              ") runs past the end of the " + std::to_string(block.requested) +
                              "-byte allocation at " + hex(address_of(start)));
      }
    }
  }
  return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, prefix(device_) + what + " address " + hex(address) +
                                                       " is not inside a live allocation of this device");
}

}  // namespace spora::sim
