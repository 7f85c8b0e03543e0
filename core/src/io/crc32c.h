// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the per-tensor
// checksum of model and checkpoint files. On x86-64 with SSE4.2 it runs on
// the crc32 instruction (chosen once at run time); elsewhere on a table.
#pragma once
#include <cstddef>
#include <cstdint>

namespace spora::io {

// CRC of `n` bytes continuing from `crc` (0 to start): crc32c(b, crc32c(a))
// equals the CRC of a followed by b. crc32c("123456789") = 0xE3069283.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// The two implementations, exposed so tests can check they agree.
uint32_t crc32c_table(const void* data, size_t n, uint32_t crc);
// False when the CPU has no SSE4.2 (then crc32c_hw must not be called).
bool crc32c_hw_available();
uint32_t crc32c_hw(const void* data, size_t n, uint32_t crc);

}  // namespace spora::io
