// Philox-4x32-10, the counter-based generator of Salmon, Moraes, Dror and
// Shaw, "Parallel random numbers: as easy as 1, 2, 3" (SC'11), and the
// mapping from its words to the bits random ops consume. Header-only and
// among the SDK's helpers because core (the data pipeline's transforms) and
// every plugin (the random ops' kernels) must draw the same numbers, and
// neither may include the other's sources.
//
// A counter-based generator has no state to advance: block b of a stream is
// a pure function of (key, counter). Random ops therefore compute element i
// from i alone, so any split of the work across threads or devices yields
// the same bits (the differential harness compares cpu and sim exactly).
//
// Streams. A stream is keyed by (seed, offset). Its 32-bit words are
//   word j = philox(key = seed, counter = (j / 4, offset))[j % 4]
// where the 128-bit counter holds the block index j / 4 in its low 64 bits
// (words c0, c1) and the offset in its high 64 bits (c2, c3), and the key
// is the seed's low (k0) and high (k1) halves. Streams of different offsets
// never share a counter, so a caller that wants fresh numbers under one seed
// only needs a new offset (a call counter is enough); an op would have to
// draw 2^66 words before two offsets' streams could meet.
#pragma once
#include <cstdint>

// Callable from GPU kernels too (the CUDA and ROCm plugins draw the same
// streams on the device); plain inline functions elsewhere.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define SPORA_PHILOX_HD __host__ __device__
#else
#define SPORA_PHILOX_HD
#endif

namespace spora::plugin {

struct PhiloxBlock {
  uint32_t v[4];
};

// One Philox-4x32 block: 10 rounds over `ctr` under key (k0, k1).
SPORA_PHILOX_HD inline PhiloxBlock philox4x32_10(PhiloxBlock ctr, uint32_t k0, uint32_t k1) {
  // Multipliers and Weyl key increments from the paper.
  constexpr uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = ctr.v[0], c1 = ctr.v[1], c2 = ctr.v[2], c3 = ctr.v[3];
  for (int round = 0; round < 10; ++round) {
    if (round) {
      k0 += kW0;
      k1 += kW1;
    }
    const uint64_t p0 = kM0 * c0, p1 = kM1 * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
  }
  return {{c0, c1, c2, c3}};
}

// The stream of (seed, offset); see the top of this file.
class PhiloxStream {
 public:
  SPORA_PHILOX_HD PhiloxStream(uint64_t seed, uint64_t offset)
      : k0_(static_cast<uint32_t>(seed)), k1_(static_cast<uint32_t>(seed >> 32)),
        o0_(static_cast<uint32_t>(offset)), o1_(static_cast<uint32_t>(offset >> 32)) {}

  // Words 4b .. 4b+3.
  SPORA_PHILOX_HD PhiloxBlock block(uint64_t b) const {
    return philox4x32_10({{static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32), o0_, o1_}}, k0_, k1_);
  }

 private:
  uint32_t k0_, k1_, o0_, o1_;
};

// Words to uniforms, exact in double. 24 bits suffice for every type stored
// in 32 bits or less (f32 has 24 significant bits); f64 takes 53 bits from
// two words.
constexpr double kTwoM24 = 1.0 / 16777216.0;             // 2^-24
constexpr double kTwoM53 = 1.0 / 9007199254740992.0;     // 2^-53

// [0, 1) on the grid k * 2^-24.
SPORA_PHILOX_HD inline double uniform24(uint32_t w) { return static_cast<double>(w >> 8) * kTwoM24; }
// (0, 1]: safe to take the logarithm of.
SPORA_PHILOX_HD inline double uniform24_open0(uint32_t w) { return static_cast<double>((w >> 8) + 1) * kTwoM24; }
// (0, 1), symmetric: the midpoints (k + 1/2) * 2^-24.
SPORA_PHILOX_HD inline double uniform24_mid(uint32_t w) { return (static_cast<double>(w >> 8) + 0.5) * kTwoM24; }

SPORA_PHILOX_HD inline uint64_t bits53(uint32_t hi, uint32_t lo) {
  return (static_cast<uint64_t>(hi >> 5) << 26) | (lo >> 6);
}
SPORA_PHILOX_HD inline double uniform53(uint32_t hi, uint32_t lo) { return static_cast<double>(bits53(hi, lo)) * kTwoM53; }
SPORA_PHILOX_HD inline double uniform53_open0(uint32_t hi, uint32_t lo) {
  return static_cast<double>(bits53(hi, lo) + 1) * kTwoM53;
}
// (0, 1), symmetric: odd multiples of 2^-53 (k + 1/2 would need 54 bits).
SPORA_PHILOX_HD inline double uniform53_mid(uint32_t hi, uint32_t lo) { return static_cast<double>(bits53(hi, lo) | 1u) * kTwoM53; }

}  // namespace spora::plugin
