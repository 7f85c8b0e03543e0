// Reference concat, stack and split. Inference hands them 2-D views
// (core/src/ops/shape_ops.cpp): every operand is (rows, width) with the same
// rows, and a whole row is the parts' rows side by side, so each is a loop of
// memcpy calls whatever the axis or dtype.
#include "copy.h"

namespace spora::plugin {

void RowCopy::run(const void* const* in, void* const* out, int64_t begin, int64_t end) const {
  for (int i = 0; i < parts; ++i) {
    const int64_t w = width[i];
    if (w == 0) continue;
    if (join) {
      const char* src = static_cast<const char*>(in[i]) + begin * w;
      char* dst = static_cast<char*>(out[0]) + begin * total + offset[i];
      for (int64_t r = begin; r < end; ++r, src += w, dst += total) std::memcpy(dst, src, static_cast<size_t>(w));
    } else {
      const char* src = static_cast<const char*>(in[0]) + begin * total + offset[i];
      char* dst = static_cast<char*>(out[i]) + begin * w;
      for (int64_t r = begin; r < end; ++r, src += total, dst += w) std::memcpy(dst, src, static_cast<size_t>(w));
    }
  }
}

namespace {

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const RowCopy& c = p.get<RowCopy>();
  c.run(in, out, 0, c.rows);
}

}  // namespace

spora_plugin_error_t* plan_row_copy(KernelPlan& p) {
  RowCopy c;
  c.join = p.op != "split";
  if (c.join ? p.num_inputs < 1 || p.num_outputs != 1 : p.num_inputs != 1 || p.num_outputs < 1)
    return invalid(p, c.join ? "takes one or more inputs and one output" : "takes one input and one or more outputs");
  const TensorInfo* parts = c.join ? p.in : p.out;
  const TensorInfo& whole = c.join ? p.out[0] : p.in[0];
  c.parts = c.join ? p.num_inputs : p.num_outputs;
  const int64_t es = static_cast<int64_t>(dtype_size(whole.dtype));
  if (whole.shape.rank != 2) return invalid(p, "operands must be 2-D (rows, width) views");
  c.rows = whole.shape.dims[0];
  for (int i = 0; i < c.parts; ++i) {
    const TensorInfo& t = parts[i];
    if (t.dtype != whole.dtype) return invalid(p, "operands differ in dtype");
    if (t.shape.rank != 2 || t.shape.dims[0] != c.rows) return invalid(p, "operands must be 2-D with equal rows");
    c.offset[i] = c.total;
    if (__builtin_mul_overflow(t.shape.dims[1], es, &c.width[i]) || __builtin_add_overflow(c.total, c.width[i], &c.total))
      return invalid(p, "row width overflows");
  }
  int64_t whole_width;
  if (__builtin_mul_overflow(whole.shape.dims[1], es, &whole_width) || c.total != whole_width)
    return invalid(p, "part widths do not add up to the whole");
  p.state = std::make_shared<RowCopy>(c);
  p.run = run;
  return nullptr;
}

namespace {

void register_kernels(KernelTable& t) {
  for (const char* op : {"concat", "stack", "split"}) t.add({op, "ref", plan_row_copy});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
