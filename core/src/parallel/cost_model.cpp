#include "parallel/cost_model.h"

#include <algorithm>

#include "support/error.h"

namespace spora::parallel {

CostModel::CostModel(std::vector<int64_t> mesh, DeviceSpec device, Topology topology)
    : mesh_(std::move(mesh)), device_(device), topology_(topology) {
  if (device_.peak_flops <= 0 || device_.mem_bandwidth <= 0 || device_.memory_bytes <= 0)
    fail(Code::kInvalidArgument, "[cost model] device peak_flops ({}), mem_bandwidth ({}) and memory ({}) must be > 0",
         device_.peak_flops, device_.mem_bandwidth, device_.memory_bytes);
  if (topology_.devices_per_node < 1 || topology_.intra.bandwidth <= 0 || topology_.inter.bandwidth <= 0 ||
      topology_.intra.latency < 0 || topology_.inter.latency < 0)
    fail(Code::kInvalidArgument,
         "[cost model] topology needs devices_per_node >= 1 (got {}), bandwidths > 0 (got {}, {}) and latencies >= 0",
         topology_.devices_per_node, topology_.intra.bandwidth, topology_.inter.bandwidth);
  for (int64_t s : mesh_)
    if (s < 1) fail(Code::kInvalidArgument, "[cost model] mesh axis sizes must be >= 1 (got {})", s);
}

double CostModel::compute_time(const Cost& c, double shards) const {
  return std::max(c.flops / device_.peak_flops, c.bytes / device_.mem_bandwidth) / std::max(shards, 1.0);
}

double CostModel::op_time(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs,
                          double shards) const {
  OpCall call;
  infer_call(op, in.data(), static_cast<int>(in.size()), attrs, call);
  if (call.view) return 0;  // a view runs no kernel
  return compute_time(op.estimate(call), shards);
}

Link CostModel::axis_link(int axis) const {
  if (axis < 0 || axis >= static_cast<int>(mesh_.size()))
    fail(Code::kInvalidArgument, "[cost model] mesh axis {} out of range (mesh has {})", axis, mesh_.size());
  // Row-major ranks: the group of axis a steps by the product of the later
  // axes' sizes and spans that times its own size.
  int64_t stride = 1;
  for (size_t b = static_cast<size_t>(axis) + 1; b < mesh_.size(); ++b) stride *= mesh_[b];
  const int64_t span = stride * mesh_[static_cast<size_t>(axis)];
  const bool inside = span <= topology_.devices_per_node && topology_.devices_per_node % span == 0;
  return inside ? topology_.intra : topology_.inter;
}

double CostModel::ring(int axis, double steps_alpha, double bytes_factor, double bytes) const {
  const double n = static_cast<double>(mesh_.at(static_cast<size_t>(axis)));
  if (n <= 1) return 0;
  const Link l = axis_link(axis);
  return steps_alpha * (n - 1) * l.latency + bytes_factor * (n - 1) / n * bytes / l.bandwidth;
}

double CostModel::all_reduce(int axis, double bytes) const { return ring(axis, 2, 2, bytes); }
double CostModel::all_gather(int axis, double bytes) const { return ring(axis, 1, 1, bytes); }
double CostModel::reduce_scatter(int axis, double bytes) const { return ring(axis, 1, 1, bytes); }
double CostModel::all_to_all(int axis, double bytes) const { return ring(axis, 1, 1, bytes); }

double CostModel::local_bytes(const TensorMeta& t, const TensorLayout& l) const {
  double b = static_cast<double>(t.shape.numel()) * static_cast<double>(dtype_size(t.dtype));
  for (int a : l.dims)
    if (a != kReplicated && a < static_cast<int>(mesh_.size())) b /= static_cast<double>(mesh_[static_cast<size_t>(a)]);
  return b;
}

double CostModel::redistribute(const TensorMeta& t, const TensorLayout& from, const TensorLayout& to,
                               bool bucketed) const {
  if (from.rank() != to.rank() || from.rank() != t.shape.rank)
    fail(Code::kInternal, "[cost model] redistributing a rank-{} tensor between layouts of rank {} and {}",
         t.shape.rank, from.rank(), to.rank());
  TensorLayout cur = from;
  cur.free = false;
  double time = 0;
  const int axes = static_cast<int>(mesh_.size());
  for (int a = 0; a < axes; ++a) {  // 1. partial sums
    const uint32_t bit = 1u << a;
    if (!(cur.partial & bit) || (to.partial & bit)) continue;
    int dim = -1;
    for (int d = 0; d < cur.rank() && dim < 0; ++d)
      if (to.dims[static_cast<size_t>(d)] == a && cur.dims[static_cast<size_t>(d)] == kReplicated) dim = d;
    if (dim >= 0) {
      time += reduce_scatter(a, local_bytes(t, cur));
      cur.dims[static_cast<size_t>(dim)] = a;
    } else if (bucketed && topology_.gradient_bucket_bytes > 0) {
      // One bucket's all_reduce, this gradient's share of its latency: by
      // bytes, and at least one of a bucket's at most 64 tensors.
      const double bytes = local_bytes(t, cur);
      const double share = std::min(1.0, std::max(bytes / topology_.gradient_bucket_bytes, 1.0 / 64));
      time += all_reduce(a, bytes) - (1 - share) * ring(a, 2, 0, 0);
    } else {
      time += all_reduce(a, local_bytes(t, cur));
    }
    cur.partial &= ~bit;
  }
  for (int d = 0; d < cur.rank(); ++d) {  // 2. splits that go
    const int a = cur.dims[static_cast<size_t>(d)];
    if (a == kReplicated || a == to.dims[static_cast<size_t>(d)]) continue;
    const int64_t k = mesh_[static_cast<size_t>(a)];
    int moved = -1;
    for (int d2 = 0; d2 < cur.rank() && moved < 0; ++d2)
      if (to.dims[static_cast<size_t>(d2)] == a && cur.dims[static_cast<size_t>(d2)] == kReplicated &&
          (t.shape.dims[d2] / k) % 1 == 0 && t.shape.dims[d2] % k == 0)
        moved = d2;
    if (moved >= 0) {
      time += all_to_all(a, local_bytes(t, cur));
      cur.dims[static_cast<size_t>(d)] = kReplicated;
      cur.dims[static_cast<size_t>(moved)] = a;
      continue;
    }
    cur.dims[static_cast<size_t>(d)] = kReplicated;
    time += all_gather(a, local_bytes(t, cur));
  }
  return time;  // 3. new splits are local slices: free
}

}  // namespace spora::parallel
