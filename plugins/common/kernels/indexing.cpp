// Reference indexing kernels: take (gather, embedding, index_select),
// gather_nd, gather_elements, scatter_add, one_hot. Shapes arrive canonical (see
// core/src/ops/indexing.cpp). Index values are only known here, so every
// one is checked: [-n, n) selects (negatives wrap like numpy), anything else
// selects nothing and leaves zeros (gathers), drops the update
// (scatter_add) or leaves the row at off_value (one_hot).
#include <string>
#include <vector>

#include "copy.h"

namespace spora::plugin {
namespace {

bool index_dtype(int32_t t) { return t == SPORA_DTYPE_I32 || t == SPORA_DTYPE_I64; }

// Calls f(I{}) with I the index storage type.
template <class F>
void visit_index(int32_t dtype, F&& f) {
  if (dtype == SPORA_DTYPE_I64) f(int64_t{});
  else f(int32_t{});
}

// The position `i` selects in a dim of size n, or -1.
inline int64_t wrap(int64_t i, int64_t n) {
  if (i < 0) i += n;
  return i >= 0 && i < n ? i : -1;
}

// ---- take: y[o, j, :] = x[o, idx[j], :] -----------------------------------

struct Take {
  int64_t outer, n, k, row;  // row: bytes of one inner slice
  int32_t index_dtype;
};

void run_take(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const Take& s = p.get<Take>();
  if (s.row == 0) return;
  visit_index(s.index_dtype, [&](auto tag) {
    using I = decltype(tag);
    const I* idx = static_cast<const I*>(in[1]);
    const char* x = static_cast<const char*>(in[0]);
    char* y = static_cast<char*>(out[0]);
    for (int64_t o = 0; o < s.outer; ++o, x += s.n * s.row) {
      for (int64_t j = 0; j < s.k; ++j, y += s.row) {
        const int64_t i = wrap(static_cast<int64_t>(idx[j]), s.n);
        if (i >= 0) std::memcpy(y, x + i * s.row, static_cast<size_t>(s.row));
        else std::memset(y, 0, static_cast<size_t>(s.row));
      }
    }
  });
}

spora_plugin_error_t* plan_take(KernelPlan& p) {
  if (auto* e = expect_operands(p, 2, 1)) return e;
  const Shape &x = p.in[0].shape, &idx = p.in[1].shape, &y = p.out[0].shape;
  if (p.in[0].dtype != p.out[0].dtype) return invalid(p, "data and output differ in dtype");
  if (!index_dtype(p.in[1].dtype)) return invalid(p, "indices must be i32 or i64");
  if (x.rank != 3 || idx.rank != 1 || y.rank != 3 || y.dims[0] != x.dims[0] || y.dims[1] != idx.dims[0] ||
      y.dims[2] != x.dims[2])
    return invalid(p, "expects data (outer, n, inner), indices (k,) and output (outer, k, inner)");
  Take s{x.dims[0], x.dims[1], idx.dims[0], 0, p.in[1].dtype};
  if (__builtin_mul_overflow(x.dims[2], static_cast<int64_t>(dtype_size(p.out[0].dtype)), &s.row))
    return invalid(p, "rows too large");
  p.state = std::make_shared<Take>(s);
  p.run = run_take;
  return nullptr;
}

// ---- gather_nd: y[j, :] = x[idx[j, 0], ..., idx[j, q-1], ...] ------------

struct GatherNd {
  int q;
  int64_t m, row;                   // row: bytes of one gathered slice
  int64_t dims[SPORA_MAX_RANK];     // x's leading q dims
  int64_t st[SPORA_MAX_RANK];       // their strides, in slices
  int32_t index_dtype;
};

void run_gather_nd(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const GatherNd& s = p.get<GatherNd>();
  if (s.row == 0) return;
  visit_index(s.index_dtype, [&](auto tag) {
    using I = decltype(tag);
    const I* idx = static_cast<const I*>(in[1]);
    const char* x = static_cast<const char*>(in[0]);
    char* y = static_cast<char*>(out[0]);
    for (int64_t j = 0; j < s.m; ++j, idx += s.q, y += s.row) {
      int64_t off = 0;
      bool ok = true;
      for (int k = 0; k < s.q && ok; ++k) {
        const int64_t i = wrap(static_cast<int64_t>(idx[k]), s.dims[k]);
        ok = i >= 0;
        off += i * s.st[k];
      }
      if (ok) std::memcpy(y, x + off * s.row, static_cast<size_t>(s.row));
      else std::memset(y, 0, static_cast<size_t>(s.row));
    }
  });
}

spora_plugin_error_t* plan_gather_nd(KernelPlan& p) {
  if (auto* e = expect_operands(p, 2, 1)) return e;
  const Shape &x = p.in[0].shape, &idx = p.in[1].shape, &y = p.out[0].shape;
  if (p.in[0].dtype != p.out[0].dtype) return invalid(p, "data and output differ in dtype");
  if (!index_dtype(p.in[1].dtype)) return invalid(p, "indices must be i32 or i64");
  if (idx.rank != 2 || idx.dims[1] > x.rank || y.rank != 2 || y.dims[0] != idx.dims[0])
    return invalid(p, "expects indices (m, q) with q <= rank of x and output (m, inner)");
  GatherNd s{};
  s.q = static_cast<int>(idx.dims[1]);
  s.m = idx.dims[0];
  s.index_dtype = p.in[1].dtype;
  int64_t inner = 1;
  for (int d = s.q; d < x.rank; ++d) inner *= x.dims[d];  // a sub-product of x's element count
  if (y.dims[1] != inner) return invalid(p, "output rows do not match x's trailing dims");
  int64_t st = 1;
  for (int k = s.q - 1; k >= 0; --k) {
    s.dims[k] = x.dims[k];
    s.st[k] = st;
    st *= x.dims[k];
  }
  if (__builtin_mul_overflow(inner, static_cast<int64_t>(dtype_size(p.out[0].dtype)), &s.row))
    return invalid(p, "rows too large");
  p.state = std::make_shared<GatherNd>(s);
  p.run = run_gather_nd;
  return nullptr;
}

// ---- gather_elements: y[p] = x[p with p[axis] = idx[p]] -------------------

struct GatherElements {
  int rank, axis;
  int64_t idx_dims[SPORA_MAX_RANK];
  int64_t x_st[SPORA_MAX_RANK];  // in elements
  int64_t axis_dim, count, elem;  // count: index (and output) elements
  int32_t index_dtype;
};

void run_gather_elements(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const GatherElements& s = p.get<GatherElements>();
  visit_index(s.index_dtype, [&](auto tag) {
    using I = decltype(tag);
    const I* idx = static_cast<const I*>(in[1]);
    const char* x = static_cast<const char*>(in[0]);
    char* y = static_cast<char*>(out[0]);
    const size_t elem = static_cast<size_t>(s.elem);
    int64_t pos[SPORA_MAX_RANK] = {};
    int64_t xo = 0;  // x's offset of p without the axis coordinate
    for (int64_t j = 0; j < s.count; ++j) {
      const int64_t i = wrap(static_cast<int64_t>(idx[j]), s.axis_dim);
      if (i >= 0) std::memcpy(y + j * s.elem, x + (xo + i * s.x_st[s.axis]) * s.elem, elem);
      else std::memset(y + j * s.elem, 0, elem);
      for (int d = s.rank - 1; d >= 0; --d) {  // next p, row-major
        const int64_t xs = d == s.axis ? 0 : s.x_st[d];
        xo += xs;
        if (++pos[d] < s.idx_dims[d]) break;
        xo -= xs * s.idx_dims[d];
        pos[d] = 0;
      }
    }
  });
}

spora_plugin_error_t* plan_gather_elements(KernelPlan& p) {
  if (auto* e = expect_operands(p, 2, 1)) return e;
  const Shape &x = p.in[0].shape, &idx = p.in[1].shape, &y = p.out[0].shape;
  if (p.in[0].dtype != p.out[0].dtype) return invalid(p, "data and output differ in dtype");
  if (!index_dtype(p.in[1].dtype)) return invalid(p, "indices must be i32 or i64");
  if (x.rank < 1 || idx.rank != x.rank || y != idx)
    return invalid(p, "expects x and indices of one rank >= 1 and the output indices' shape");
  GatherElements s{};
  s.rank = x.rank;
  s.axis = static_cast<int>(p.attrs.get_int("axis", -1));
  if (s.axis < 0 || s.axis >= x.rank) return invalid(p, "axis out of range");
  for (int d = 0; d < x.rank; ++d) {
    if (d != s.axis && idx.dims[d] > x.dims[d]) return invalid(p, "indices exceed x outside the axis");
    s.idx_dims[d] = idx.dims[d];
  }
  dense_strides(x, s.x_st);
  s.axis_dim = x.dims[s.axis];
  s.count = idx.numel();
  s.elem = static_cast<int64_t>(dtype_size(p.out[0].dtype));
  s.index_dtype = p.in[1].dtype;
  p.state = std::make_shared<GatherElements>(s);
  p.run = run_gather_elements;
  return nullptr;
}

// ---- scatter_add: y = x; y[p with p[axis] = idx[p]] += updates[p] ---------

struct Scatter {
  int rank, axis;
  int64_t idx_dims[SPORA_MAX_RANK];
  int64_t x_st[SPORA_MAX_RANK];
  int64_t u_st[SPORA_MAX_RANK];
  int64_t axis_dim, numel, count;  // count: index elements
  int32_t index_dtype;
};

// Addition as scatter_add defines it per storage type.
template <class T>
inline T add(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else if constexpr (std::is_integral_v<T>)  // wraps instead of overflowing
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) + static_cast<std::make_unsigned_t<T>>(b));
  else return a + b;
}

// Adds every update into acc (x's layout); A is T, or float for 16-bit
// floats so that repeated adds round once.
template <class A, class T, class I>
void scatter_into(const Scatter& s, A* acc, const T* upd, const I* idx) {
  const int r = s.rank;
  int64_t pos[SPORA_MAX_RANK] = {};
  int64_t xo = 0, uo = 0;  // offsets without the axis coordinate in x
  for (int64_t j = 0; j < s.count; ++j) {
    const int64_t i = wrap(static_cast<int64_t>(idx[j]), s.axis_dim);
    if (i >= 0) {
      A& dst = acc[xo + i * s.x_st[s.axis]];
      dst = add<A>(dst, static_cast<A>(load(upd[uo])));
    }
    for (int d = r - 1; d >= 0; --d) {
      const int64_t xs = d == s.axis ? 0 : s.x_st[d];
      xo += xs;
      uo += s.u_st[d];
      if (++pos[d] < s.idx_dims[d]) break;
      xo -= xs * s.idx_dims[d];
      uo -= s.u_st[d] * s.idx_dims[d];
      pos[d] = 0;
    }
  }
}

void run_scatter(const KernelPlan& p, const void* const* in, void* const* out, void* workspace) {
  const Scatter& s = p.get<Scatter>();
  if (s.numel == 0) return;
  visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in[0]);
    const T* upd = static_cast<const T*>(in[2]);
    T* y = static_cast<T*>(out[0]);
    visit_index(s.index_dtype, [&](auto itag) {
      using I = decltype(itag);
      const I* idx = static_cast<const I*>(in[1]);
      if constexpr (is_half_v<T>) {
        float* acc = static_cast<float*>(workspace);
        for (int64_t k = 0; k < s.numel; ++k) acc[k] = load(x[k]);
        scatter_into(s, acc, upd, idx);
        for (int64_t k = 0; k < s.numel; ++k) y[k] = store<T>(acc[k]);
      } else {
        std::memcpy(y, x, static_cast<size_t>(s.numel) * sizeof(T));
        scatter_into(s, y, upd, idx);
      }
    });
  });
}

spora_plugin_error_t* plan_scatter(KernelPlan& p) {
  if (auto* e = expect_operands(p, 3, 1)) return e;
  const Shape &x = p.in[0].shape, &idx = p.in[1].shape, &u = p.in[2].shape, &y = p.out[0].shape;
  const int32_t dt = p.out[0].dtype;
  if (p.in[0].dtype != dt || p.in[2].dtype != dt) return invalid(p, "x, updates and output differ in dtype");
  if (!index_dtype(p.in[1].dtype)) return invalid(p, "indices must be i32 or i64");
  if (x != y || x.rank < 1 || idx.rank != x.rank || u.rank != x.rank)
    return invalid(p, "x, indices and updates need one rank >= 1 and the output x's shape");
  Scatter s{};
  s.rank = x.rank;
  s.axis = static_cast<int>(p.attrs.get_int("axis", -1));
  if (s.axis < 0 || s.axis >= x.rank) return invalid(p, "axis out of range");
  for (int d = 0; d < x.rank; ++d) {
    if (idx.dims[d] > u.dims[d] || (d != s.axis && idx.dims[d] > x.dims[d]))
      return invalid(p, "indices exceed updates or x outside the axis");
    s.idx_dims[d] = idx.dims[d];
  }
  dense_strides(x, s.x_st);
  dense_strides(u, s.u_st);
  s.axis_dim = x.dims[s.axis];
  s.numel = x.numel();
  s.count = idx.numel();
  s.index_dtype = p.in[1].dtype;
  if (dt == SPORA_DTYPE_F16 || dt == SPORA_DTYPE_BF16) p.workspace = static_cast<size_t>(s.numel) * sizeof(float);
  p.state = std::make_shared<Scatter>(s);
  p.run = run_scatter;
  return nullptr;
}

// ---- one_hot --------------------------------------------------------------

struct OneHot {
  int64_t m, depth, elem;
  uint64_t on, off;  // bit patterns in the output dtype
  int32_t index_dtype;
};

void run_one_hot(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const OneHot& s = p.get<OneHot>();
  char* y = static_cast<char*>(out[0]);
  fill(y, &s.off, s.m * s.depth, s.elem);
  if (s.depth == 0) return;
  visit_index(s.index_dtype, [&](auto tag) {
    using I = decltype(tag);
    const I* idx = static_cast<const I*>(in[0]);
    for (int64_t j = 0; j < s.m; ++j) {
      const int64_t i = wrap(static_cast<int64_t>(idx[j]), s.depth);
      if (i >= 0) std::memcpy(y + (j * s.depth + i) * s.elem, &s.on, static_cast<size_t>(s.elem));
    }
  });
}

spora_plugin_error_t* plan_one_hot(KernelPlan& p) {
  if (auto* e = expect_operands(p, 1, 1)) return e;
  const Shape &idx = p.in[0].shape, &y = p.out[0].shape;
  if (!index_dtype(p.in[0].dtype)) return invalid(p, "indices must be i32 or i64");
  if (idx.rank != 1 || y.rank != 2 || y.dims[0] != idx.dims[0] || y.dims[1] != p.attrs.get_int("depth", -1))
    return invalid(p, "expects indices (m,) and output (m, depth)");
  const int32_t dt = p.out[0].dtype;
  OneHot s{idx.dims[0], y.dims[1], static_cast<int64_t>(dtype_size(dt)), 0, 0, p.in[0].dtype};
  if (!encode_value(dt, p.attrs.get_float("on_value", 1), &s.on) ||
      !encode_value(dt, p.attrs.get_float("off_value", 0), &s.off))
    return invalid(p, std::string("on_value or off_value is not representable in ") + dtype_name(dt));
  p.state = std::make_shared<OneHot>(s);
  p.run = run_one_hot;
  return nullptr;
}

void register_kernels(KernelTable& t) {
  for (const char* op : {"gather", "embedding", "index_select"}) t.add({op, "ref", plan_take});
  t.add({"gather_nd", "ref", plan_gather_nd});
  t.add({"gather_elements", "ref", plan_gather_elements});
  t.add({"scatter_add", "ref", plan_scatter});
  t.add({"one_hot", "ref", plan_one_hot});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
