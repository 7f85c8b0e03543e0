// A pipeline is a chain of nodes pulled by an iterator: each node's next()
// pulls rows from its child. Nodes are built fresh for every iterator from
// the immutable Dataset description (dataset.h), so two iterators over one
// dataset share nothing mutable.
//
// Epochs. reset(epoch) rewinds a node to the start of epoch `epoch`; all
// randomness is keyed by (seed, epoch, position), so an epoch's rows are a
// pure function of the description and the epoch number.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/column.h"

namespace spora::data {

class Node {
 public:
  virtual ~Node() = default;
  // Rewinds to the first row of `epoch`. Called before the first next().
  virtual void reset(uint64_t epoch) = 0;
  // The next row, or false at the end of the epoch.
  virtual bool next(Row& out) = 0;
};

using NodePtr = std::unique_ptr<Node>;

// Philox words for one (seed, stream, index): the data pipeline's only
// source of randomness, so its results depend on no thread count.
struct PhiloxWords {
  uint32_t w[4];
};
PhiloxWords philox_words(uint64_t seed, uint64_t stream, uint64_t index);
// Streams of the three users of randomness, kept apart so no two ever read
// the same words: the source sampler, shuffle(), and map() (whose streams,
// epoch << 20 | map << 8 | op, stay below 2^62 for any real epoch count).
constexpr uint64_t kSamplerStream = uint64_t{1} << 63;
constexpr uint64_t kShuffleStream = uint64_t{1} << 62;

// An integer uniform in [0, n) from one word (n <= 2^32).
inline uint64_t uniform_below(uint32_t w, uint64_t n) { return (uint64_t{w} * n) >> 32; }

// A random permutation of [0, n) keyed by (seed, stream): Fisher-Yates with
// one Philox word per swap.
std::vector<int64_t> permutation(int64_t n, uint64_t seed, uint64_t stream);

}  // namespace spora::data
