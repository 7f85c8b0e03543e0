// map(ops, num_parallel_workers): transforms rows on a worker pool.
//
// The node pulls rows from its input on the consumer's thread, in order,
// numbering them; chunks of rows go to the workers, and results come back
// in submission order. A row's randomness is keyed by its number, so the
// output is the same for any worker count. At most `window` chunks are in
// flight: the bounded prefetch that keeps workers busy while the consumer
// (batching, the training step) runs.
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>

#include "data/dataset.h"
#include "data/worker_pool.h"
#include "support/error.h"

namespace spora::data {
namespace {

// Rows per task: enough to amortise the hand-off (a few microseconds),
// few enough that workers share an epoch's tail evenly.
constexpr size_t kChunk = 16;

struct Chunk {
  std::vector<Row> rows;
  uint64_t first_index = 0;
  bool done = false;
  std::exception_ptr error;
  size_t error_at = 0;  // the row that failed: the rows before it are handed out first
};

class MapNode final : public Node {
 public:
  MapNode(NodePtr child, const Dataset& d)
      : child_(std::move(child)), ops_(d.ops), columns_(d.map_columns), seed_(d.seed), map_id_(d.map_id),
        window_(static_cast<size_t>(d.num_workers) * 4), pool_(d.num_workers) {}

  ~MapNode() override { drain(); }

  void reset(uint64_t epoch) override {
    drain();
    inflight_.clear();
    child_->reset(epoch);
    epoch_ = epoch;
    next_index_ = 0;
    child_done_ = false;
    out_pos_ = 0;
  }

  bool next(Row& out) override {
    fill();
    if (inflight_.empty()) return false;
    std::shared_ptr<Chunk> head = inflight_.front();
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return head->done; });
    }
    if (head->error && out_pos_ >= head->error_at) {
      drain();
      std::rethrow_exception(head->error);
    }
    out = std::move(head->rows[out_pos_++]);
    if (out_pos_ == head->rows.size()) {
      inflight_.pop_front();
      out_pos_ = 0;
      fill();
    }
    return true;
  }

 private:
  void fill() {
    while (!child_done_ && inflight_.size() < window_) {
      auto c = std::make_shared<Chunk>();
      c->first_index = next_index_;
      while (c->rows.size() < kChunk) {
        Row r;
        if (!child_->next(r)) {
          child_done_ = true;
          break;
        }
        c->rows.push_back(std::move(r));
      }
      if (c->rows.empty()) break;
      next_index_ += c->rows.size();
      inflight_.push_back(c);
      pool_.submit([this, c] { run(*c); });
    }
  }

  void run(Chunk& c) {
    size_t i = 0;
    try {
      for (; i < c.rows.size(); ++i) {
        Row& row = c.rows[i];
        for (size_t k = 0; k < ops_.size(); ++k) {
          // Stream: epoch, this map's position in the chain and the op's in
          // the map; block: the row's number in the epoch.
          const RandomKey key{seed_, (epoch_ << 20) | (uint64_t(map_id_ & 0xfff) << 8) | (k & 0xff),
                              c.first_index + i};
          for (int col : columns_) {
            if (col >= static_cast<int>(row.size()))
              fail(Code::kInvalidArgument, "[dataset map] row has {} columns, no column {}", row.size(), col);
            row[col] = ops_[k]->apply(row[col], key);
          }
        }
      }
    } catch (...) {
      c.error = std::current_exception();
      c.error_at = i;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      c.done = true;
    }
    cv_.notify_all();
  }

  // Waits until no submitted chunk is running (workers reference this node).
  void drain() {
    std::unique_lock<std::mutex> lock(mu_);
    for (const auto& c : inflight_) cv_.wait(lock, [&] { return c->done; });
  }

  NodePtr child_;
  std::vector<TransformPtr> ops_;
  std::vector<int> columns_;
  uint64_t seed_;
  int map_id_;
  size_t window_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Chunk>> inflight_;
  uint64_t epoch_ = 0, next_index_ = 0;
  bool child_done_ = false;
  size_t out_pos_ = 0;
  WorkerPool pool_;  // last: its threads stop before the rest is destroyed
};

}  // namespace

NodePtr make_map_node(NodePtr child, const Dataset& d) { return std::make_unique<MapNode>(std::move(child), d); }

}  // namespace spora::data
