// The data pipeline's randomness: the Philox-4x32-10 generator the random
// ops use (sdk/include/spora/sdk/philox.h, header-only), so seeds mean the same
// thing everywhere and nothing depends on which worker ran a sample.
#include <spora/sdk/philox.h>

#include "data/node.h"

namespace spora::data {

PhiloxWords philox_words(uint64_t seed, uint64_t stream, uint64_t index) {
  const plugin::PhiloxBlock b = plugin::PhiloxStream(seed, stream).block(index);
  return {{b.v[0], b.v[1], b.v[2], b.v[3]}};
}

std::vector<int64_t> permutation(int64_t n, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    const PhiloxWords w = philox_words(seed, stream, static_cast<uint64_t>(i));
    // Two words make the swap index unbiased enough for any n < 2^63.
    const uint64_t r = (uint64_t{w.w[0]} << 32) | w.w[1];
    const int64_t j = static_cast<int64_t>(r % static_cast<uint64_t>(i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

}  // namespace spora::data
