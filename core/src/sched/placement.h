// Placement by plugin capability, done once when a graph is compiled for a
// device. For every op node, in order of preference:
//   1. the device has a kernel for it: it runs there;
//   2. the op has a decomposition: it is replaced by the decomposition's
//      nodes (placed in turn, so their parts may fall further down this list);
//   3. the cpu device has a kernel for it: it runs on cpu, and the plan copies
//      its inputs from the device and its outputs back (see executor.h);
//   4. otherwise compilation fails with Code::kUnimplemented naming the op,
//      both devices' reasons and the node's source location.
// A device whose fallback is off (Device::set_fallback, for conformance
// checks) gets only step 1: a missing kernel fails with the plugin's reason.
// Views (reshape and the like) run nowhere: they alias their input.
#pragma once
#include <vector>

#include "ir/graph.h"
#include "runtime/device.h"

namespace spora::sched {

struct Placement {
  // The graph as it will run: decomposed, each op node's `device` set to the
  // name of the device that runs it.
  ir::Graph graph;
  // Per node of `graph`: true when it runs on `host`.
  std::vector<bool> on_host;
  // The cpu device, when some node runs there; else null.
  Device* host = nullptr;
};

// `fallback` is the device for step 3; null means the cpu device
// (host_device()), looked up only if some op needs it.
Placement place(const ir::Graph& graph, Device* device, Device* fallback = nullptr);

// The cpu device of the cpu plugin, if it is loaded and ready; else null.
Device* host_device();

}  // namespace spora::sched
