#include "parallel/redistribute.h"

#include <fmt/format.h>

#include "ir/builder.h"
#include "support/error.h"

namespace spora::parallel {
namespace {

Attrs over(const Mesh& mesh, int axis) {
  Attrs a;
  a.set("group", AttrValue::of_int(mesh.groups[static_cast<size_t>(axis)]));
  return a;
}

}  // namespace

Shape local_shape(const Mesh& mesh, const Shape& global, const TensorLayout& l) {
  Shape s = global;
  for (int d = 0; d < s.rank && d < l.rank(); ++d)
    if (l.dims[static_cast<size_t>(d)] != kReplicated) s.dims[d] /= mesh.shape[static_cast<size_t>(l.dims[static_cast<size_t>(d)])];
  return s;
}

ir::Value redistribute(ir::Graph& g, const Mesh& mesh, ir::Value v, const TensorLayout& from, const TensorLayout& to,
                       const ir::SourceLoc& loc) {
  TensorLayout cur = from;
  cur.free = false;
  if (cur.rank() != to.rank())
    fail(Code::kInternal, "[parallel] redistributing a rank-{} value to a rank-{} layout", cur.rank(), to.rank());
  // 1. Partial sums the target does not keep: reduce-scatter into a dim the
  //    target splits over the same axis, else all-reduce.
  for (int a = 0; a < mesh.axes(); ++a) {
    const uint32_t bit = 1u << a;
    if (!(cur.partial & bit) || (to.partial & bit)) continue;
    int dim = -1;
    for (int d = 0; d < cur.rank() && dim < 0; ++d)
      if (to.dims[static_cast<size_t>(d)] == a && cur.dims[static_cast<size_t>(d)] == kReplicated) dim = d;
    Attrs attrs = over(mesh, a);
    attrs.set("op", AttrValue::of_string("sum"));
    if (dim >= 0) {
      attrs.set("axis", AttrValue::of_int(dim));
      attrs.set("size", AttrValue::of_int(mesh.shape[static_cast<size_t>(a)]));
      v = g.add_op("reduce_scatter", {v}, attrs, loc)[0];
      cur.dims[static_cast<size_t>(dim)] = a;
    } else {
      v = g.add_op("all_reduce", {v}, attrs, loc)[0];
    }
    cur.partial &= ~bit;
  }
  const uint32_t becomes = to.partial & ~cur.partial;
  if (becomes >> mesh.axes())
    fail(Code::kInternal, "[parallel] a value laid out {} cannot become the partial sum {}", cur.str(), to.str());
  // 2. Splits that go: a split moving to another dim over the same axis is
  //    one all_to_all; otherwise the dim is gathered whole.
  for (int d = 0; d < cur.rank(); ++d) {
    const int a = cur.dims[static_cast<size_t>(d)];
    if (a == kReplicated || a == to.dims[static_cast<size_t>(d)]) continue;
    const int64_t k = mesh.shape[static_cast<size_t>(a)];
    int moved = -1;
    for (int d2 = 0; d2 < cur.rank() && moved < 0; ++d2)
      if (to.dims[static_cast<size_t>(d2)] == a && cur.dims[static_cast<size_t>(d2)] == kReplicated &&
          g.meta(v).shape.dims[d2] % k == 0)
        moved = d2;
    if (moved >= 0) {
      Attrs attrs = over(mesh, a);
      attrs.set("split_axis", AttrValue::of_int(moved));
      attrs.set("concat_axis", AttrValue::of_int(d));
      attrs.set("size", AttrValue::of_int(k));
      v = g.add_op("all_to_all", {v}, attrs, loc)[0];
      cur.dims[static_cast<size_t>(d)] = kReplicated;
      cur.dims[static_cast<size_t>(moved)] = a;
      continue;
    }
    Attrs attrs = over(mesh, a);
    attrs.set("axis", AttrValue::of_int(d));
    attrs.set("size", AttrValue::of_int(mesh.shape[static_cast<size_t>(a)]));
    v = g.add_op("all_gather", {v}, attrs, loc)[0];
    cur.dims[static_cast<size_t>(d)] = kReplicated;
  }
  // 3. Splits that come: this rank's block, sliced locally.
  for (int d = 0; d < cur.rank(); ++d) {
    const int a = to.dims[static_cast<size_t>(d)];
    if (a == kReplicated || cur.dims[static_cast<size_t>(d)] == a) continue;
    const int64_t size = g.meta(v).shape.dims[d], k = mesh.shape[static_cast<size_t>(a)];
    if (size % k != 0)
      fail(Code::kInternal, "[parallel] dim {} of size {} does not split over mesh axis {} ({} devices)", d, size, a, k);
    const int64_t block = size / k, start = mesh.coord(a) * block;
    Attrs attrs;
    attrs.set("starts", AttrValue::of_ints({start}));
    attrs.set("ends", AttrValue::of_ints({start + block}));
    attrs.set("axes", AttrValue::of_ints({d}));
    v = g.add_op("slice", {v}, attrs, loc)[0];
    cur.dims[static_cast<size_t>(d)] = a;
  }
  // 4. Partial sums that come (a rule whose output adds this value to
  //    per-rank contributions, scatter_add's `x`): the value stays on the
  //    ranks at coordinate 0 of those axes and is zero on the others, so its
  //    sum over them is the value. No communication. `where` on a constant
  //    that differs by rank keeps rank graphs structurally identical and is
  //    exact for every value (multiplying by 0 would turn inf into NaN).
  if (becomes) {
    bool keep = true;
    for (int a = 0; a < mesh.axes(); ++a)
      if (becomes & (1u << a)) keep = keep && mesh.coord(a) == 0;
    ir::Builder b(g, loc);
    v = b.op("where", {b.scalar(keep ? 1 : 0, SPORA_DTYPE_BOOL), v, b.scalar(0, g.meta(v).dtype)});
  }
  return v;
}

}  // namespace spora::parallel
