// How passes evaluate ops at compile time (constant folding, inlining of
// control flow with constant conditions) without depending on the runtime:
// they call an Evaluator, and the layer that can run ops (the runtime, on
// the host's cpu device) registers one. A PassContext may carry its own.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/attrs.h"
#include "ir/op.h"

namespace spora::passes {

// A value known at compile time: its type and bytes (host memory, dense,
// row-major).
struct HostValue {
  TensorMeta meta;
  std::shared_ptr<const std::vector<uint8_t>> bytes;
};

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  // False when nothing can be evaluated now (no cpu device loaded): the
  // passes then fold nothing. Cheap; asked once per pass.
  virtual bool available() const = 0;
  // Runs `op` with `attrs` over `inputs` (one per operand, in order) and
  // returns its `num_outputs` outputs. Nothing, with the reason in `*why`,
  // when it fails: the node is then left for run time, whose error names
  // its source line. Thread-safe; never throws spora::Error.
  virtual std::optional<std::vector<HostValue>> evaluate(const OpDef& op, const std::vector<HostValue>& inputs,
                                                         const Attrs& attrs, size_t num_outputs,
                                                         std::string* why) const = 0;
};

// The process's evaluator (null until one is registered). The runtime
// registers its own during static initialisation; the object must live for
// the rest of the process. Returns 0, for static registration.
int set_default_evaluator(const Evaluator* e);
const Evaluator* default_evaluator();

}  // namespace spora::passes
