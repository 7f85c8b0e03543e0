// Reference layout kernels: transpose (any permutation).
#include "kernel_plan.h"

namespace spora::plugin {
namespace {

struct State {
  int64_t perm[SPORA_MAX_RANK];
};

// Byte-wise element copy: layout kernels only move elements, so one
// instantiation per element size serves every dtype.
template <class E>
void transpose_t(const KernelPlan& p, const E* x, E* y) {
  const Shape& si = p.in[0].shape;
  const Shape& so = p.out[0].shape;
  const int r = so.rank;
  const int64_t n = so.numel();
  if (n == 0) return;
  if (r == 0) {
    y[0] = x[0];
    return;
  }
  int64_t st_in[SPORA_MAX_RANK] = {};
  int64_t s = 1;
  for (int i = si.rank - 1; i >= 0; --i) {
    st_in[i] = s;
    s *= si.dims[i];
  }
  // Stride in the input for a step along each output dimension.
  int64_t st[SPORA_MAX_RANK] = {};
  for (int i = 0; i < r; ++i) st[i] = st_in[p.get<State>().perm[i]];
  int64_t idx[SPORA_MAX_RANK] = {};
  int64_t off = 0;
  const int64_t inner = so.dims[r - 1], is = st[r - 1];
  for (int64_t done = 0; done < n; done += inner) {
    for (int64_t j = 0; j < inner; ++j) y[j] = x[off + j * is];
    y += inner;
    for (int d = r - 2; d >= 0; --d) {
      off += st[d];
      if (++idx[d] < so.dims[d]) break;
      off -= st[d] * so.dims[d];
      idx[d] = 0;
    }
  }
}

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  switch (dtype_size(p.out[0].dtype)) {
    case 1: return transpose_t(p, static_cast<const uint8_t*>(in[0]), static_cast<uint8_t*>(out[0]));
    case 2: return transpose_t(p, static_cast<const uint16_t*>(in[0]), static_cast<uint16_t*>(out[0]));
    case 4: return transpose_t(p, static_cast<const uint32_t*>(in[0]), static_cast<uint32_t*>(out[0]));
    case 8: return transpose_t(p, static_cast<const uint64_t*>(in[0]), static_cast<uint64_t*>(out[0]));
  }
}

spora_plugin_error_t* plan(KernelPlan& p) {
  if (auto* e = expect_operands(p, 1, 1)) return e;
  if (p.in[0].dtype != p.out[0].dtype) return invalid(p, "input and output differ in dtype");
  const std::vector<int64_t> perm = p.attrs.get_ints("perm");
  const int r = p.in[0].shape.rank;
  if (perm.size() != static_cast<size_t>(r) || p.out[0].shape.rank != r) return invalid(p, "perm must list every axis");
  State s{};
  bool seen[SPORA_MAX_RANK] = {};
  for (int i = 0; i < r; ++i) {
    const int64_t ax = perm[i];
    if (ax < 0 || ax >= r || seen[ax]) return invalid(p, "perm is not a permutation");
    seen[ax] = true;
    s.perm[i] = ax;
    if (p.out[0].shape.dims[i] != p.in[0].shape.dims[ax]) return invalid(p, "output shape does not match perm");
  }
  p.state = std::make_shared<State>(s);
  p.run = run;
  return nullptr;
}

void register_kernels(KernelTable& t) { t.add({"transpose", "ref", plan}); }
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
