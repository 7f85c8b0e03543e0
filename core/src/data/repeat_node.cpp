// repeat(count): the input `count` times per epoch.
#include "data/dataset.h"

namespace spora::data {
namespace {

class RepeatNode final : public Node {
 public:
  RepeatNode(NodePtr child, int64_t count) : child_(std::move(child)), count_(static_cast<uint64_t>(count)) {}
  // Pass r of outer epoch e is the child's epoch e * count + r, so each
  // repetition reshuffles and re-augments.
  void reset(uint64_t epoch) override {
    epoch_ = epoch;
    pass_ = 0;
    child_->reset(epoch_ * count_);
  }
  bool next(Row& out) override {
    while (pass_ < count_) {
      if (child_->next(out)) return true;
      if (++pass_ < count_) child_->reset(epoch_ * count_ + pass_);
    }
    return false;
  }

 private:
  NodePtr child_;
  uint64_t count_, epoch_ = 0, pass_ = 0;
};

}  // namespace

NodePtr make_repeat_node(NodePtr child, int64_t count) {
  return std::make_unique<RepeatNode>(std::move(child), count);
}

}  // namespace spora::data
