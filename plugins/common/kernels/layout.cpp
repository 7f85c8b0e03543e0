// Reference layout kernels that are one strided copy each: transpose,
// broadcast_to, tile, flip, slice, strided_slice (see core/src/ops/layout.cpp
// and shape_ops.cpp for what inference guarantees). Plans re-check every
// bound a read depends on, so a malformed descriptor is an error, never an
// out-of-bounds read.
#include <string>

#include "copy.h"

namespace spora::plugin {
namespace {

spora_plugin_error_t* plan_transpose(KernelPlan& p, const int64_t* st, StridedCopy& c) {
  const Shape &in = p.in[0].shape, &out = p.out[0].shape;
  const std::vector<int64_t> perm = p.attrs.get_ints("perm");
  if (perm.size() != static_cast<size_t>(in.rank) || out.rank != in.rank) return invalid(p, "perm must list every axis");
  bool seen[SPORA_MAX_RANK] = {};
  for (int i = 0; i < in.rank; ++i) {
    const int64_t ax = perm[i];
    if (ax < 0 || ax >= in.rank || seen[ax]) return invalid(p, "perm is not a permutation");
    seen[ax] = true;
    if (out.dims[i] != in.dims[ax]) return invalid(p, "output shape does not match perm");
    c.push(out.dims[i], st[ax]);
  }
  return nullptr;
}

spora_plugin_error_t* plan_broadcast(KernelPlan& p, const int64_t* st, StridedCopy& c) {
  const Shape &in = p.in[0].shape, &out = p.out[0].shape;
  if (!broadcastable(in, out)) return invalid(p, "input does not broadcast to the output (pad it to the output rank)");
  for (int d = 0; d < out.rank; ++d) c.push(out.dims[d], in.dims[d] == 1 ? 0 : st[d]);
  return nullptr;
}

spora_plugin_error_t* plan_tile(KernelPlan& p, const int64_t* st, StridedCopy& c) {
  const Shape &in = p.in[0].shape, &out = p.out[0].shape;
  const std::vector<int64_t> reps = p.attrs.get_ints("reps");
  if (in.rank != out.rank || reps.size() != static_cast<size_t>(out.rank))
    return invalid(p, "input, output and reps must have one rank");
  // Output dim d is (reps[d], in.dims[d]) in row-major order: the repeat
  // index reads nothing new (stride 0).
  for (int d = 0; d < out.rank; ++d) {
    int64_t n;
    if (reps[d] < 0 || __builtin_mul_overflow(reps[d], in.dims[d], &n) || n != out.dims[d])
      return invalid(p, "output shape does not match reps");
    c.push(reps[d], 0);
    c.push(in.dims[d], st[d]);
  }
  return nullptr;
}

spora_plugin_error_t* plan_flip(KernelPlan& p, const int64_t* st, StridedCopy& c) {
  const Shape &in = p.in[0].shape, &out = p.out[0].shape;
  if (in != out) return invalid(p, "input and output shapes differ");
  bool flip[SPORA_MAX_RANK] = {};
  for (int64_t ax : p.attrs.get_ints("axes")) {
    if (ax < 0 || ax >= in.rank) return invalid(p, "axis out of range");
    flip[ax] = true;
  }
  for (int d = 0; d < in.rank; ++d) {
    if (flip[d] && in.dims[d] > 0) c.offset += (in.dims[d] - 1) * st[d];
    c.push(in.dims[d], flip[d] ? -st[d] : st[d]);
  }
  return nullptr;
}

// Shared by slice and strided_slice: out dim d reads begin[d] + i * step[d].
spora_plugin_error_t* plan_window(KernelPlan& p, const std::vector<int64_t>& begin, const std::vector<int64_t>& step,
                                  const int64_t* st, StridedCopy& c) {
  const Shape &in = p.in[0].shape, &out = p.out[0].shape;
  if (out.rank != in.rank || begin.size() != static_cast<size_t>(in.rank) || step.size() != begin.size())
    return invalid(p, "begin and strides need one entry per dim");
  for (int d = 0; d < in.rank; ++d) {
    const int64_t n = out.dims[d], b = begin[d], s = step[d];
    if (n > 0) {
      int64_t span, last;
      if (s == 0 || b < 0 || b >= in.dims[d] || __builtin_mul_overflow(n - 1, s, &span) ||
          __builtin_add_overflow(b, span, &last) || last < 0 || last >= in.dims[d])
        return invalid(p, "dim " + std::to_string(d) + " reads outside the input");
      c.offset += b * st[d];
    }
    c.push(n, n > 1 ? s * st[d] : 0);  // |s * st| <= the input's size when n > 1
  }
  return nullptr;
}

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const StridedCopy& c = p.get<StridedCopy>();
  c.run(in[0], out[0], 0, c.numel);
}

}  // namespace

spora_plugin_error_t* plan_strided_copy(KernelPlan& p) {
  if (auto* e = expect_operands(p, 1, 1)) return e;
  if (p.in[0].dtype != p.out[0].dtype) return invalid(p, "input and output differ in dtype");
  int64_t st[SPORA_MAX_RANK] = {};
  dense_strides(p.in[0].shape, st);
  StridedCopy c;
  c.elem = static_cast<int64_t>(dtype_size(p.out[0].dtype));
  spora_plugin_error_t* e = nullptr;
  if (p.op == "transpose") {
    e = plan_transpose(p, st, c);
  } else if (p.op == "broadcast_to") {
    e = plan_broadcast(p, st, c);
  } else if (p.op == "tile") {
    e = plan_tile(p, st, c);
  } else if (p.op == "flip") {
    e = plan_flip(p, st, c);
  } else if (p.op == "slice") {
    const std::vector<int64_t> starts = p.attrs.get_ints("starts");
    e = plan_window(p, starts, std::vector<int64_t>(starts.size(), 1), st, c);
  } else if (p.op == "strided_slice") {
    e = plan_window(p, p.attrs.get_ints("begin"), p.attrs.get_ints("strides"), st, c);
  } else {
    return unsupported(p, "not a strided-copy op");
  }
  if (e) return e;
  c.simplify();
  if (c.numel != p.out[0].shape.numel()) return invalid(p, "output shape does not match the copy");
  p.state = std::make_shared<StridedCopy>(c);
  p.run = run;
  return nullptr;
}

namespace {

void register_kernels(KernelTable& t) {
  for (const char* op : {"transpose", "broadcast_to", "tile", "flip", "slice", "strided_slice"})
    t.add({op, "ref", plan_strided_copy});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
