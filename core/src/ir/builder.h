// A graph builder with the helpers rules are written with: gradient rules
// (autodiff) and decompositions (ops a plugin lacks, rebuilt from simpler
// ones) both add nodes through it, tagged with the source location of the
// node they stand for.
#pragma once
#include <vector>

#include "ir/graph.h"

namespace spora::ir {

class Builder {
 public:
  Builder(ir::Graph& g, ir::SourceLoc loc) : g_(g), loc_(std::move(loc)) {}

  ir::Graph& graph() { return g_; }
  const TensorMeta& meta(Value v) const { return g_.meta(v); }
  // One-output op.
  Value op(const char* name, std::vector<Value> inputs, const Attrs& attrs = {});
  std::vector<Value> ops(const char* name, std::vector<Value> inputs, const Attrs& attrs = {});
  // A scalar constant of `dtype` (broadcasts in binary ops).
  Value scalar(double v, DType dtype);
  // A dense constant filled with `v`.
  Value full(double v, DType dtype, const Shape& shape);
  // Sums the broadcast dimensions of `grad` away so it has shape `target`
  // (the adjoint of numpy broadcasting).
  Value sum_to(Value grad, const Shape& target);
  Value reshape(Value v, const Shape& shape);

 private:
  ir::Graph& g_;
  ir::SourceLoc loc_;
};

}  // namespace spora::ir
