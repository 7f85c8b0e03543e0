// shuffle(buffer_size, seed): MindSpore's buffered shuffle. The buffer fills
// with the first buffer_size rows; then each output is a random buffer slot,
// refilled with the next input row; at the end the buffer drains in random
// order. Draw k of epoch e uses Philox block k of stream kShuffleStream | e.
#include "data/dataset.h"

namespace spora::data {
namespace {

class ShuffleNode final : public Node {
 public:
  ShuffleNode(NodePtr child, int64_t buffer_size, uint64_t seed)
      : child_(std::move(child)), cap_(static_cast<size_t>(buffer_size)), seed_(seed) {}

  void reset(uint64_t epoch) override {
    child_->reset(epoch);
    epoch_ = epoch;
    draws_ = 0;
    buf_.clear();
    child_done_ = false;
  }

  bool next(Row& out) override {
    while (!child_done_ && buf_.size() < cap_) {
      Row r;
      if (!child_->next(r)) {
        child_done_ = true;
        break;
      }
      buf_.push_back(std::move(r));
    }
    if (buf_.empty()) return false;
    const PhiloxWords w = philox_words(seed_, kShuffleStream | epoch_, draws_++);
    const size_t j = static_cast<size_t>(uniform_below(w.w[0], buf_.size()));
    out = std::move(buf_[j]);
    // Refill the slot from the input (keeps the rest of the buffer in place),
    // or, once the input is dry, close the gap with the last row.
    Row r;
    if (!child_done_ && child_->next(r)) {
      buf_[j] = std::move(r);
    } else {
      child_done_ = true;
      buf_[j] = std::move(buf_.back());
      buf_.pop_back();
    }
    return true;
  }

 private:
  NodePtr child_;
  size_t cap_;
  uint64_t seed_, epoch_ = 0, draws_ = 0;
  std::vector<Row> buf_;
  bool child_done_ = false;
};

}  // namespace

NodePtr make_shuffle_node(NodePtr child, int64_t buffer_size, uint64_t seed) {
  return std::make_unique<ShuffleNode>(std::move(child), buffer_size, seed);
}

}  // namespace spora::data
