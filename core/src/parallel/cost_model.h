// The cost model of the strategy search (docs/parallel.md, "Cost model"):
// compute time of an op from the op registry's work estimate and a device
// description, communication time of each collective with an alpha-beta
// model per mesh axis from a topology description, and the per-device bytes
// of a tensor under a layout. Times in seconds, sizes in bytes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/op.h"
#include "passes/allreduce_fusion.h"
#include "ir/sharding.h"

namespace spora::parallel {

// One accelerator: peak arithmetic rate, memory bandwidth, memory size.
struct DeviceSpec {
  double peak_flops = 100e12;     // flop/s
  double mem_bandwidth = 2e12;    // bytes/s
  double memory_bytes = 80e9;     // the per-device memory limit of a plan
};

// One link class: bandwidth per device (bytes/s) and per-message latency (s).
struct Link {
  double bandwidth = 0;
  double latency = 0;
};

// Ranks fill nodes in order (ranks 0..devices_per_node-1 on node 0, ...);
// a mesh axis whose group stays within one node uses `intra`, else `inter`
// (a ring that leaves the node runs at the slower link's speed).
struct Topology {
  int64_t devices_per_node = 8;
  Link intra{300e9, 2e-6};  // NVLink-class
  Link inter{25e9, 10e-6};  // InfiniBand-class, per device
  // Gradient all-reduces feeding optimizer updates run in buckets of this
  // many bytes (passes/allreduce_fusion.cpp; SPORA_ALLREDUCE_BUCKET_MB, the
  // same setting the pass reads, default 25 MiB; at most 64 tensors each):
  // a gradient pays its share of one bucket's latency, by bytes and at
  // least 1/64. 0: one call each.
  double gradient_bucket_bytes = passes::gradient_bucket_bytes();
};

class CostModel {
 public:
  CostModel(std::vector<int64_t> mesh, DeviceSpec device, Topology topology);

  const std::vector<int64_t>& mesh() const { return mesh_; }
  const DeviceSpec& device() const { return device_; }
  const Topology& topology() const { return topology_; }

  // Roofline time of work `c` divided over `shards` devices:
  // max(flops / peak_flops, bytes / mem_bandwidth) / shards.
  double compute_time(const Cost& c, double shards) const;
  // The op's estimate (OpDef::estimate on its global input types) as above.
  double op_time(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs, double shards) const;

  // The link a mesh axis's collectives run over.
  Link axis_link(int axis) const;
  // Ring collectives over mesh axis `axis` (n devices, link B, alpha):
  //   all_reduce(S):     2(n-1) alpha + 2 (n-1)/n S / B   (S: each rank's buffer)
  //   all_gather(S):      (n-1) alpha +   (n-1)/n S / B   (S: the gathered result)
  //   reduce_scatter(S):  (n-1) alpha +   (n-1)/n S / B   (S: each rank's input)
  //   all_to_all(S):      (n-1) alpha +   (n-1)/n S / B   (S: each rank's buffer)
  // and 0 when n == 1.
  double all_reduce(int axis, double bytes) const;
  double all_gather(int axis, double bytes) const;
  double reduce_scatter(int axis, double bytes) const;
  double all_to_all(int axis, double bytes) const;

  // Bytes one device holds of tensor t laid out as l.
  double local_bytes(const TensorMeta& t, const TensorLayout& l) const;
  // The time to move t from layout `from` to `to`: the same steps
  // parallel::redistribute inserts (partials reduce-scattered into a wanted
  // split or all-reduced, splits moved by all_to_all or all-gathered, new
  // splits sliced locally for free), each priced on its current local size.
  // `bucketed`: t is a gradient read by an optimizer update, whose
  // all-reduce shares a bucket (Topology::gradient_bucket_bytes) with
  // others: its latency term is scaled by its share of the bucket.
  double redistribute(const TensorMeta& t, const TensorLayout& from, const TensorLayout& to,
                      bool bucketed = false) const;

 private:
  double ring(int axis, double steps_alpha, double bytes_factor, double bytes) const;
  std::vector<int64_t> mesh_;
  DeviceSpec device_;
  Topology topology_;
};

}  // namespace spora::parallel
