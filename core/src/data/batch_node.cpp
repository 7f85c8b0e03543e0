// batch(batch_size, drop_remainder): stacks rows into arrays with a leading
// batch dimension. Every row of a batch must match the first in each
// column's dtype and shape; a mismatch names the column and both shapes.
#include <cstring>

#include "data/dataset.h"
#include "support/error.h"

namespace spora::data {
namespace {

class BatchNode final : public Node {
 public:
  BatchNode(NodePtr child, int64_t batch_size, bool drop, std::vector<std::string> names)
      : child_(std::move(child)), bs_(static_cast<size_t>(batch_size)), drop_(drop), names_(std::move(names)) {}

  void reset(uint64_t epoch) override {
    child_->reset(epoch);
    batch_index_ = 0;
  }

  bool next(Row& out) override {
    rows_.clear();
    while (rows_.size() < bs_) {
      Row r;
      if (!child_->next(r)) break;
      rows_.push_back(std::move(r));
    }
    if (rows_.empty() || (drop_ && rows_.size() < bs_)) return false;
    const Row& first = rows_[0];
    out.assign(first.size(), Column{});
    for (size_t c = 0; c < first.size(); ++c) {
      const Column& f = first[c];
      std::vector<int64_t> shape{static_cast<int64_t>(rows_.size())};
      shape.insert(shape.end(), f.shape.begin(), f.shape.end());
      Column& dst = out[c];
      dst.dtype = f.dtype;
      dst.shape = std::move(shape);
      dst.bytes.resize(f.bytes.size() * rows_.size());
      for (size_t i = 0; i < rows_.size(); ++i) {
        const Column& x = rows_[i][c];
        if (x.dtype != f.dtype || x.shape != f.shape)
          fail(Code::kInvalidArgument,
               "[dataset batch] batch {}: column '{}' of row {} is {} {} but row 0 is {} {}; rows of a batch must "
               "match (crop or resize them in map first)",
               batch_index_, c < names_.size() ? names_[c] : std::to_string(c), i, dtype_name(x.dtype),
               shape_str(x.shape), dtype_name(f.dtype), shape_str(f.shape));
        std::memcpy(dst.bytes.data() + i * f.bytes.size(), x.bytes.data(), f.bytes.size());
      }
    }
    ++batch_index_;
    return true;
  }

 private:
  NodePtr child_;
  size_t bs_;
  bool drop_;
  std::vector<std::string> names_;
  std::vector<Row> rows_;
  int64_t batch_index_ = 0;
};

}  // namespace

NodePtr make_batch_node(NodePtr child, int64_t batch_size, bool drop_remainder, std::vector<std::string> names) {
  return std::make_unique<BatchNode>(std::move(child), batch_size, drop_remainder, std::move(names));
}

}  // namespace spora::data
