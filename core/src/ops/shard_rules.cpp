// The shared sharding rules of ops/shard_rules.h.
#include "ops/shard_rules.h"

#include <algorithm>

namespace spora::shard {

namespace {

// The partial sums every input keeps under `policy` (0: resolve them all).
uint32_t kept_partial(const ShardQuery& q, Partial policy) {
  const size_t n = q.in_layouts.size();
  auto partial = [&](size_t i) { return q.in_layouts[i].free ? 0u : q.in_layouts[i].partial; };
  switch (policy) {
    case Partial::kNone: return 0;
    case Partial::kAdditive: {
      const uint32_t p = partial(0);
      for (size_t i = 1; i < n; ++i)
        if (partial(i) != p) return 0;
      return p;
    }
    case Partial::kScaling: {
      uint32_t p = 0;
      int count = 0;
      for (size_t i = 0; i < n; ++i)
        if (partial(i)) {
          p = partial(i);
          ++count;
        }
      return count == 1 ? p : 0;
    }
    case Partial::kFirst:
      for (size_t i = 1; i < n; ++i)
        if (partial(i)) return 0;
      return partial(0);
  }
  return 0;
}

}  // namespace

bool elementwise(const ShardQuery& q, ShardPlan& p, Partial policy) {
  if (q.out.empty()) return false;
  const Shape& os = q.out[0].shape;
  const int r = os.rank;
  for (const TensorMeta& m : q.out)
    if (m.shape != os) return false;
  TensorLayout out = TensorLayout::replicated(r);
  uint32_t used = 0;
  const uint32_t keep = kept_partial(q, policy);
  // Splits of placed inputs first, in input order; an axis serves one dim.
  for (size_t i = 0; i < q.in.size(); ++i) {
    const TensorLayout& l = q.in_layouts[i];
    if (l.free) continue;
    const Shape& s = q.in[i].shape;
    const int off = r - s.rank;
    for (int d = 0; d < s.rank; ++d) {
      const int a = l.dims[static_cast<size_t>(d)];
      const int od = off + d;
      if (a == kReplicated || s.dims[d] != os.dims[od] || out.dims[static_cast<size_t>(od)] != kReplicated) continue;
      if ((used & (1u << a)) || (keep & (1u << a)) || !divides(q, os.dims[od], a)) continue;
      out.dims[static_cast<size_t>(od)] = a;
      used |= 1u << a;
    }
  }
  out.partial = keep;
  p.in.clear();
  for (size_t i = 0; i < q.in.size(); ++i) {
    const Shape& s = q.in[i].shape;
    const int off = r - s.rank;
    TensorLayout w = TensorLayout::replicated(s.rank);
    for (int d = 0; d < s.rank; ++d)
      if (s.dims[d] == os.dims[off + d]) w.dims[static_cast<size_t>(d)] = out.dims[static_cast<size_t>(off + d)];
    // Kept partials stay on the inputs that carry them (a scalar factor of
    // mul stays whole); a free input is never partial.
    if (!q.in_layouts[i].free) w.partial = q.in_layouts[i].partial & keep;
    p.in.push_back(w);
  }
  p.out.assign(q.out.size(), out);
  return true;
}

bool elementwise_plain(const ShardQuery& q, ShardPlan& p) { return elementwise(q, p, Partial::kNone); }
bool elementwise_additive(const ShardQuery& q, ShardPlan& p) { return elementwise(q, p, Partial::kAdditive); }
bool elementwise_scaling(const ShardQuery& q, ShardPlan& p) { return elementwise(q, p, Partial::kScaling); }
bool elementwise_first(const ShardQuery& q, ShardPlan& p) { return elementwise(q, p, Partial::kFirst); }

bool along_axis(const ShardQuery& q, ShardPlan& p) {
  if (!elementwise(q, p, Partial::kNone)) return false;
  const int r = q.out[0].shape.rank;
  int64_t axis = q.attrs->get_int("axis");
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return false;
  for (TensorLayout& l : p.out) l.dims[static_cast<size_t>(axis)] = kReplicated;
  for (size_t i = 0; i < p.in.size(); ++i) {
    const int off = r - q.in[i].shape.rank;
    if (axis - off >= 0) p.in[i].dims[static_cast<size_t>(axis - off)] = kReplicated;
  }
  return true;
}

}  // namespace spora::shard
