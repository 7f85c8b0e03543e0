// Device memory of the simulated accelerator: one arena per device.
//
// An arena is an anonymous mmap region carved up by a first-fit allocator.
// The addresses it hands out are not host pointers: they live in a tag range
// (see kDeviceAddressBase) that is non-canonical on x86-64, so a host
// dereference faults instead of silently touching the arena. Every device
// access goes through translate(), which checks the range lies inside a live
// allocation of this device.
#pragma once
#include <spora/plugin.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace spora::sim {

// Device d's addresses start at kDeviceAddressBase + d * kDeviceAddressSpan +
// kDeviceAddressGuard. The guard keeps the first address of a device away
// from the round tag value, so small offsets from a NULL-ish tag are caught.
constexpr uint64_t kDeviceAddressBase = 0x5100000000000000ull;
constexpr uint64_t kDeviceAddressSpan = uint64_t{1} << 40;
constexpr uint64_t kDeviceAddressGuard = 4096;
// Every allocation starts and ends on this boundary (properties.alignment).
constexpr size_t kAlignment = 256;
// The largest arena whose addresses still fit in one device's tag range.
constexpr uint64_t kMaxArenaBytes = kDeviceAddressSpan - kDeviceAddressGuard;

class Arena {
 public:
  // Reserves `bytes` (a multiple of kAlignment, <= kMaxArenaBytes) of
  // address space with MAP_NORESERVE: pages cost nothing until touched.
  // Returns NULL and sets *out, or an error saying why mmap failed.
  static spora_plugin_error_t* create(int32_t device, uint64_t bytes, Arena** out);
  ~Arena();  // unmaps the region

  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  uint64_t capacity() const { return bytes_; }

  // Allocates `size` bytes (0 allowed: still a unique address).
  spora_plugin_error_t* allocate(size_t size, uint64_t* out_address);
  // Frees the allocation that starts exactly at `address`.
  spora_plugin_error_t* release(uint64_t address);
  // Byte counts for memory_stats: sizes requested by live allocations, and
  // the arena space they hold (rounded to kAlignment), with their peaks.
  void stats(spora_memory_stats_t* out) const;
  void reset_peak();
  // Maps [address, address + size) to host memory, provided it lies inside
  // one live allocation (address may point anywhere inside it: sub-buffers).
  // `what` names the argument in the error message ("dst", "input 1").
  spora_plugin_error_t* translate(uint64_t address, size_t size, const char* what, void** out) const;

 private:
  struct Block {
    size_t requested;  // bytes the caller asked for; translate checks these
    size_t reserved;   // requested rounded up to kAlignment (at least one unit)
  };

  Arena(int32_t device, char* host, uint64_t bytes);
  uint64_t address_of(size_t offset) const { return tag_base_ + offset; }

  const int32_t device_;
  char* const host_;        // start of the mmap region
  const uint64_t bytes_;    // size of the region
  const uint64_t tag_base_; // device address of offset 0

  mutable std::mutex mu_;
  std::map<size_t, size_t> free_;  // offset -> size of each free block, never adjacent
  std::map<size_t, Block> live_;   // offset -> live allocation
  uint64_t free_bytes_;
  uint64_t allocated_ = 0, peak_allocated_ = 0;  // requested bytes of live blocks
  uint64_t reserved_ = 0, peak_reserved_ = 0;    // their rounded sizes
};

}  // namespace spora::sim
