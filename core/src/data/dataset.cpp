#include "data/dataset.h"

#include "data/idx.h"
#include "support/error.h"

namespace spora::data {

const std::vector<std::string>& Dataset::column_names() const {
  return kind == Kind::kSource ? source->names : child->column_names();
}

int64_t Dataset::size() const {
  switch (kind) {
    case Kind::kSource: return (source->rows + num_shards - 1) / num_shards;
    case Kind::kShuffle:
    case Kind::kMap: return child->size();
    case Kind::kBatch: {
      const int64_t n = child->size();
      return drop_remainder ? n / batch_size : (n + batch_size - 1) / batch_size;
    }
    case Kind::kRepeat: return child->size() * count;
  }
  return 0;
}

NodePtr Dataset::build() const {
  switch (kind) {
    case Kind::kSource: return make_source_node(*this);
    case Kind::kShuffle: return make_shuffle_node(child->build(), buffer_size, seed);
    case Kind::kMap: return make_map_node(child->build(), *this);
    case Kind::kBatch: return make_batch_node(child->build(), batch_size, drop_remainder, column_names());
    case Kind::kRepeat: return make_repeat_node(child->build(), count);
  }
  fail(Code::kInternal, "[dataset] unknown node kind");
}

DatasetPtr make_source(std::shared_ptr<const SourceData> data) {
  if (!data || data->columns.empty()) fail(Code::kInvalidArgument, "[dataset] a source needs at least one column");
  if (data->names.size() != data->columns.size())
    fail(Code::kInvalidArgument, "[dataset] {}: {} column names for {} columns", data->origin, data->names.size(),
         data->columns.size());
  for (size_t i = 0; i < data->names.size(); ++i) {
    if (data->names[i].empty()) fail(Code::kInvalidArgument, "[dataset] {}: column {} has an empty name", data->origin, i);
    for (size_t j = 0; j < i; ++j)
      if (data->names[i] == data->names[j])
        fail(Code::kInvalidArgument, "[dataset] {}: column name '{}' appears twice", data->origin, data->names[i]);
    const Column& c = data->columns[i];
    if (c.shape.empty() || c.shape[0] != data->rows)
      fail(Code::kInvalidArgument, "[dataset] {}: mismatched sample counts: column '{}' has shape {}, column '{}' {} rows",
           data->origin, data->names[i], shape_str(c.shape), data->names[0], data->rows);
  }
  auto d = std::make_shared<Dataset>();
  d->kind = Dataset::Kind::kSource;
  d->source = std::move(data);
  return d;
}

DatasetPtr with_sampler(const DatasetPtr& src, bool shuffle, uint64_t seed, int64_t num_shards, int64_t shard_id) {
  if (!src || src->kind != Dataset::Kind::kSource)
    fail(Code::kInvalidArgument, "[dataset] shuffle/num_shards/shard_id of the sampler apply to a source dataset only");
  if (num_shards < 1) fail(Code::kInvalidArgument, "[dataset] num_shards must be >= 1, got {}", num_shards);
  if (shard_id < 0 || shard_id >= num_shards)
    fail(Code::kInvalidArgument, "[dataset] shard_id {} is outside [0, num_shards = {})", shard_id, num_shards);
  if (num_shards > src->source->rows && src->source->rows > 0)
    fail(Code::kInvalidArgument, "[dataset] {}: {} shards for {} samples", src->source->origin, num_shards,
         src->source->rows);
  auto d = std::make_shared<Dataset>(*src);
  d->source_shuffle = shuffle;
  d->seed = seed;
  d->num_shards = num_shards;
  d->shard_id = shard_id;
  return d;
}

namespace {
std::shared_ptr<Dataset> step(const DatasetPtr& in, Dataset::Kind kind, const char* what) {
  if (!in) fail(Code::kInvalidArgument, "[dataset {}] input dataset is null", what);
  auto d = std::make_shared<Dataset>();
  d->kind = kind;
  d->child = in;
  return d;
}
int map_depth(const DatasetPtr& d) {
  int n = 0;
  for (const Dataset* p = d.get(); p; p = p->child.get()) n += p->kind == Dataset::Kind::kMap;
  return n;
}
}  // namespace

DatasetPtr make_shuffle(const DatasetPtr& in, int64_t buffer_size, uint64_t seed) {
  auto d = step(in, Dataset::Kind::kShuffle, "shuffle");
  if (buffer_size < 2) fail(Code::kInvalidArgument, "[dataset shuffle] buffer_size must be >= 2, got {}", buffer_size);
  d->buffer_size = buffer_size;
  d->seed = seed;
  return d;
}

DatasetPtr make_map(const DatasetPtr& in, std::vector<TransformPtr> ops, const std::vector<std::string>& columns,
                    int num_workers, uint64_t seed) {
  auto d = step(in, Dataset::Kind::kMap, "map");
  if (ops.empty()) fail(Code::kInvalidArgument, "[dataset map] no operations given");
  for (const TransformPtr& t : ops)
    if (!t) fail(Code::kInvalidArgument, "[dataset map] an operation is null");
  if (num_workers < 1 || num_workers > 256)
    fail(Code::kInvalidArgument, "[dataset map] num_parallel_workers must be in [1, 256], got {}", num_workers);
  const std::vector<std::string>& names = in->column_names();
  if (columns.empty()) {
    d->map_columns.push_back(0);  // MindSpore's default: the first column
  } else {
    for (const std::string& c : columns) {
      int found = -1;
      for (size_t i = 0; i < names.size(); ++i)
        if (names[i] == c) found = static_cast<int>(i);
      if (found < 0)
        fail(Code::kInvalidArgument, "[dataset map] no column '{}' (columns: {})", c, fmt::join(names, ", "));
      d->map_columns.push_back(found);
    }
  }
  d->ops = std::move(ops);
  d->num_workers = num_workers;
  d->seed = seed;
  d->map_id = map_depth(in);
  return d;
}

DatasetPtr make_batch(const DatasetPtr& in, int64_t batch_size, bool drop_remainder) {
  auto d = step(in, Dataset::Kind::kBatch, "batch");
  if (batch_size < 1) fail(Code::kInvalidArgument, "[dataset batch] batch_size must be >= 1, got {}", batch_size);
  d->batch_size = batch_size;
  d->drop_remainder = drop_remainder;
  return d;
}

DatasetPtr make_repeat(const DatasetPtr& in, int64_t count) {
  auto d = step(in, Dataset::Kind::kRepeat, "repeat");
  if (count < 1 || count > (int64_t{1} << 40))
    fail(Code::kInvalidArgument, "[dataset repeat] count must be >= 1, got {}", count);
  d->count = count;
  return d;
}

std::shared_ptr<const SourceData> idx_source(const std::vector<std::string>& paths,
                                             const std::vector<std::string>& names, const std::vector<DType>& dtypes) {
  if (paths.empty()) fail(Code::kInvalidArgument, "[dataset] no IDX files given");
  auto s = std::make_shared<SourceData>();
  s->origin = "IDX files " + fmt::format("{}", fmt::join(paths, ", "));
  s->names = names;
  for (size_t i = 0; i < paths.size(); ++i) {
    Column c = read_idx(paths[i]);
    if (i < dtypes.size() && dtypes[i] != SPORA_DTYPE_INVALID) c = cast_column(c, dtypes[i], "IDX source");
    if (i == 0) {
      s->rows = c.shape[0];
    } else if (c.shape[0] != s->rows) {
      fail(Code::kInvalidArgument, "[dataset] mismatched sample counts: {} has {} samples but {} has {}", paths[i],
           c.shape[0], paths[0], s->rows);
    }
    s->columns.push_back(std::move(c));
  }
  return s;
}

}  // namespace spora::data
