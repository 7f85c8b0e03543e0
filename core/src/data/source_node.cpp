// Source node: rows of in-memory arrays in the sampler's order.
#include <cstring>

#include "data/dataset.h"

namespace spora::data {
namespace {

class SourceNode final : public Node {
 public:
  explicit SourceNode(const Dataset& d)
      : data_(d.source), shuffle_(d.source_shuffle), seed_(d.seed), shards_(d.num_shards), shard_(d.shard_id) {}

  void reset(uint64_t epoch) override {
    const int64_t n = data_->rows;
    order_.clear();
    pos_ = 0;
    if (n == 0) return;
    // Every shard computes the same global order (same seed and epoch), so
    // the shards' slices are disjoint; the order wraps around to make all
    // shards equally long (at most num_shards - 1 rows repeat).
    std::vector<int64_t> global = shuffle_ ? permutation(n, seed_, kSamplerStream | epoch) : std::vector<int64_t>();
    const int64_t per_shard = (n + shards_ - 1) / shards_;
    order_.reserve(static_cast<size_t>(per_shard));
    for (int64_t k = 0; k < per_shard; ++k) {
      const int64_t p = (k * shards_ + shard_) % n;
      order_.push_back(shuffle_ ? global[static_cast<size_t>(p)] : p);
    }
  }

  bool next(Row& out) override {
    if (pos_ >= order_.size()) return false;
    const int64_t r = order_[pos_++];
    out.resize(data_->columns.size());
    for (size_t c = 0; c < data_->columns.size(); ++c) {
      const Column& src = data_->columns[c];
      Column& dst = out[c];
      dst.dtype = src.dtype;
      dst.shape.assign(src.shape.begin() + 1, src.shape.end());
      const size_t row_bytes = src.bytes.size() / static_cast<size_t>(data_->rows);
      dst.bytes.resize(row_bytes);
      std::memcpy(dst.bytes.data(), src.bytes.data() + static_cast<size_t>(r) * row_bytes, row_bytes);
    }
    return true;
  }

 private:
  std::shared_ptr<const SourceData> data_;
  bool shuffle_;
  uint64_t seed_;
  int64_t shards_, shard_;
  std::vector<int64_t> order_;
  size_t pos_ = 0;
};

}  // namespace

NodePtr make_source_node(const Dataset& d) { return std::make_unique<SourceNode>(d); }

}  // namespace spora::data
