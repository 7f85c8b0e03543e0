// The immutable description of a pipeline: a source, then shuffle / map /
// batch / repeat steps, each a Dataset pointing at its input. Like
// MindSpore's, every step returns a new Dataset; an iterator (iterator.h)
// builds fresh nodes from the description.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/node.h"
#include "data/transforms.h"

namespace spora::data {

// Whole arrays, one per column, all with the same first dimension (the
// sample count). Shared by every dataset and iterator made from it.
struct SourceData {
  std::string origin;  // for messages: "IDX files a, b" / "arrays"
  std::vector<std::string> names;
  std::vector<Column> columns;
  int64_t rows = 0;
};

struct Dataset;
using DatasetPtr = std::shared_ptr<const Dataset>;

struct Dataset {
  enum class Kind { kSource, kShuffle, kMap, kBatch, kRepeat };
  Kind kind = Kind::kSource;
  DatasetPtr child;
  // kSource: the data and its sampler. shuffle: a new permutation of all
  // rows each epoch (keyed by seed and epoch, equal on every shard); the
  // order is padded to a multiple of num_shards by wrapping around, and
  // shard k takes positions k, k + num_shards, ...
  std::shared_ptr<const SourceData> source;
  bool source_shuffle = false;
  int64_t num_shards = 1, shard_id = 0;
  // kShuffle: buffer_size, seed (also the source sampler's seed).
  int64_t buffer_size = 0;
  uint64_t seed = 0;
  // kMap: ops applied in order to each of `map_columns` (indices).
  std::vector<TransformPtr> ops;
  std::vector<int> map_columns;
  int num_workers = 1;
  int map_id = 0;  // the map's position in the chain: part of its random stream
  // kBatch
  int64_t batch_size = 0;
  bool drop_remainder = false;
  // kRepeat
  int64_t count = 1;

  const std::vector<std::string>& column_names() const;
  // Rows per epoch (batches after batch()), exact.
  int64_t size() const;
  // Fresh nodes for one iterator.
  NodePtr build() const;
};

// Builders; each validates its arguments (kInvalidArgument naming the step).
DatasetPtr make_source(std::shared_ptr<const SourceData> data);
// Sampler of a source dataset: only a source takes it.
DatasetPtr with_sampler(const DatasetPtr& src, bool shuffle, uint64_t seed, int64_t num_shards, int64_t shard_id);
DatasetPtr make_shuffle(const DatasetPtr& in, int64_t buffer_size, uint64_t seed);
DatasetPtr make_map(const DatasetPtr& in, std::vector<TransformPtr> ops, const std::vector<std::string>& columns,
                    int num_workers, uint64_t seed);
DatasetPtr make_batch(const DatasetPtr& in, int64_t batch_size, bool drop_remainder);
DatasetPtr make_repeat(const DatasetPtr& in, int64_t count);

// The source data of columns read from IDX files (one file per column;
// `dtypes[i]` SPORA_DTYPE_INVALID keeps the file's type). The files must
// agree on the sample count.
std::shared_ptr<const SourceData> idx_source(const std::vector<std::string>& paths,
                                             const std::vector<std::string>& names, const std::vector<DType>& dtypes);

// Node factories (one file each).
NodePtr make_source_node(const Dataset& d);
NodePtr make_shuffle_node(NodePtr child, int64_t buffer_size, uint64_t seed);
NodePtr make_map_node(NodePtr child, const Dataset& d);
NodePtr make_batch_node(NodePtr child, int64_t batch_size, bool drop_remainder, std::vector<std::string> names);
NodePtr make_repeat_node(NodePtr child, int64_t count);

}  // namespace spora::data
