#include "io/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace spora::io {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // Castagnoli, bit-reflected

std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? kPoly : 0u);
    t[i] = c;
  }
  return t;
}

}  // namespace

uint32_t crc32c_table(const void* data, size_t n, uint32_t crc) {
  static const std::array<uint32_t, 256> table = make_table();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

#if defined(__x86_64__)
bool crc32c_hw_available() {
  static const bool ok = __builtin_cpu_supports("sse4.2");
  return ok;
}

// Compiled for SSE4.2 regardless of the build's baseline; only called after
// crc32c_hw_available() said yes.
__attribute__((target("sse4.2"))) uint32_t crc32c_hw(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  // Byte steps up to 8-byte alignment, then 8 bytes per instruction.
  while (n && (reinterpret_cast<uintptr_t>(p) & 7u)) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    n -= 8;
  }
  while (n--) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
  return ~static_cast<uint32_t>(c);
}
#else
bool crc32c_hw_available() { return false; }
uint32_t crc32c_hw(const void* data, size_t n, uint32_t crc) { return crc32c_table(data, n, crc); }
#endif

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  return crc32c_hw_available() ? crc32c_hw(data, n, crc) : crc32c_table(data, n, crc);
}

}  // namespace spora::io
