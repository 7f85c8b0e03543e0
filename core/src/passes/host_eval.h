// Compile-time evaluation of small ops on the host's cpu device, shared by
// constant folding and inlining (whose conditions are computed from
// constants).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "runtime/device.h"

namespace spora::passes {

// A value known at compile time: its type and bytes.
struct HostValue {
  TensorMeta meta;
  std::shared_ptr<const std::vector<uint8_t>> bytes;
};

// The first device of the loaded cpu plugin, or null when there is none
// (the passes then evaluate nothing).
Device* host_device();

// Runs `n`'s op on `dev` over `inputs` (one per operand, in order) and
// returns its outputs. Nothing when the op fails here: the node is left for
// run time, whose error names its source line; `pass` names the pass in the
// debug log.
std::optional<std::vector<HostValue>> evaluate_on_host(const ir::Node& n, const std::vector<HostValue>& inputs,
                                                       Device* dev, const char* pass);

}  // namespace spora::passes
