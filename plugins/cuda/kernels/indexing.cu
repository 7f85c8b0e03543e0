// one_hot, take (gather, embedding, index_select), gather_nd and
// gather_elements with the per-element index checks of math/index_math.h,
// one kernel per (index type, element size); scatter_add one kernel per
// (index type, dtype), one thread per output element.
#include <string>

#include "gpu_device.h"
#include "kernels/copy.h"  // plugins/common: encode_value
#include "math/index_math.h"

namespace spora::gpu {
namespace {

namespace ref = spora::plugin;
static_assert(kIxMaxRank == SPORA_MAX_RANK, "index math holds every rank");

template <class I, class U>
__global__ void one_hot_kernel(const I* idx, int64_t depth, U on, U off, U* y, int64_t n) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[e] = one_hot_elem<I, U>(idx, depth, on, off, e);
}

template <class I, class U>
__global__ void take_kernel(const U* x, const I* idx, int64_t rows_n, int64_t k, int64_t inner, U* y, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[e] = take_elem<I, U>(x, idx, rows_n, k, inner, e);
}

template <class I, class U>
__global__ void gather_nd_kernel(GatherNdIndex g, const U* x, const I* idx, U* y, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[e] = gather_nd_elem<I, U>(g, x, idx, e);
}

template <class I, class U>
__global__ void gather_el_kernel(GatherElIndex g, const U* x, const I* idx, U* y, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[e] = gather_el_elem<I, U>(g, x, idx, e);
}

template <class T, class I>
__global__ void scatter_add_kernel(ScatterIndex s, const T* x, const I* idx, const T* upd, T* y, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[e] = scatter_add_elem<T, I>(s, x, idx, upd, e);
}

struct IndexState {
  bool one_hot;
  int32_t index_dtype;
  int64_t elem;             // bytes per element
  int64_t depth, m;         // one_hot
  uint64_t on, off;         // one_hot bit patterns
  int64_t outer, n, k, inner;  // take (inner in elements)
};

template <class I, class U>
void launch_t(const IndexState& s, const void* const* in, void* const* out, cudaStream_t stream) {
  if (s.one_hot) {
    const int64_t total = s.m * s.depth;
    one_hot_kernel<I, U><<<grid_for(total), kBlock, 0, stream>>>(static_cast<const I*>(in[0]), s.depth,
                                                                 static_cast<U>(s.on), static_cast<U>(s.off),
                                                                 static_cast<U*>(out[0]), total);
  } else {
    const int64_t total = s.outer * s.k * s.inner;
    take_kernel<I, U><<<grid_for(total), kBlock, 0, stream>>>(static_cast<const U*>(in[0]), static_cast<const I*>(in[1]),
                                                              s.n, s.k, s.inner, static_cast<U*>(out[0]), total);
  }
}

template <class I>
cudaError_t launch_i(const IndexState& s, const void* const* in, void* const* out, cudaStream_t stream) {
  switch (s.elem) {
    case 1: launch_t<I, uint8_t>(s, in, out, stream); break;
    case 2: launch_t<I, uint16_t>(s, in, out, stream); break;
    case 4: launch_t<I, uint32_t>(s, in, out, stream); break;
    case 8: launch_t<I, uint64_t>(s, in, out, stream); break;
    default: return cudaErrorInvalidValue;
  }
  return launched();
}

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const IndexState& s = plan.get<IndexState>();
  const int64_t total = s.one_hot ? s.m * s.depth : s.outer * s.k * s.inner;
  if (total == 0) return cudaSuccess;
  return s.index_dtype == SPORA_DTYPE_I64 ? launch_i<int64_t>(s, in, out, stream) : launch_i<int32_t>(s, in, out, stream);
}

spora_plugin_error_t* plan(GpuPlan& gp) {
  const auto& p = gp.desc;  // validated by the reference planner
  auto s = std::make_shared<IndexState>();
  s->one_hot = p.op == "one_hot";
  s->elem = static_cast<int64_t>(ref::dtype_size(p.out[0].dtype));
  if (s->one_hot) {
    s->index_dtype = p.in[0].dtype;
    s->m = p.out[0].shape.dims[0];
    s->depth = p.out[0].shape.dims[1];
    s->on = s->off = 0;
    if (!ref::encode_value(p.out[0].dtype, p.attrs.get_float("on_value", 1), &s->on) ||
        !ref::encode_value(p.out[0].dtype, p.attrs.get_float("off_value", 0), &s->off))
      return ref::invalid(p, "on_value or off_value is not representable in the output dtype");
  } else {
    s->index_dtype = p.in[1].dtype;
    s->outer = p.in[0].shape.dims[0];
    s->n = p.in[0].shape.dims[1];
    s->inner = p.in[0].shape.dims[2];
    s->k = p.in[1].shape.dims[0];
  }
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

// ---- gather_nd, gather_elements: one thread per output element, as bits ----

struct GatherState {
  bool nd;
  GatherNdIndex g_nd;
  GatherElIndex g_el;
  int32_t index_dtype;
  int64_t elem, total;
};

template <class I, class U>
void launch_gather_t(const GatherState& s, const void* const* in, void* const* out, cudaStream_t stream) {
  const U* x = static_cast<const U*>(in[0]);
  const I* idx = static_cast<const I*>(in[1]);
  U* y = static_cast<U*>(out[0]);
  if (s.nd) gather_nd_kernel<I, U><<<grid_for(s.total), kBlock, 0, stream>>>(s.g_nd, x, idx, y, s.total);
  else gather_el_kernel<I, U><<<grid_for(s.total), kBlock, 0, stream>>>(s.g_el, x, idx, y, s.total);
}

template <class I>
cudaError_t launch_gather_i(const GatherState& s, const void* const* in, void* const* out, cudaStream_t stream) {
  switch (s.elem) {
    case 1: launch_gather_t<I, uint8_t>(s, in, out, stream); break;
    case 2: launch_gather_t<I, uint16_t>(s, in, out, stream); break;
    case 4: launch_gather_t<I, uint32_t>(s, in, out, stream); break;
    case 8: launch_gather_t<I, uint64_t>(s, in, out, stream); break;
    default: return cudaErrorInvalidValue;
  }
  return launched();
}

cudaError_t launch_gather(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const GatherState& s = plan.get<GatherState>();
  if (s.total == 0) return cudaSuccess;
  return s.index_dtype == SPORA_DTYPE_I64 ? launch_gather_i<int64_t>(s, in, out, stream)
                                          : launch_gather_i<int32_t>(s, in, out, stream);
}

spora_plugin_error_t* plan_gather(GpuPlan& gp) {
  const auto& p = gp.desc;  // validated by the reference planner
  auto s = std::make_shared<GatherState>();
  s->nd = p.op == "gather_nd";
  s->index_dtype = p.in[1].dtype;
  s->elem = static_cast<int64_t>(ref::dtype_size(p.out[0].dtype));
  s->total = p.out[0].shape.numel();
  if (s->nd) s->g_nd = gather_nd_index_of(p);
  else s->g_el = gather_el_index_of(p);
  gp.state = s;
  gp.launch = launch_gather;
  return nullptr;
}

// ---- scatter_add: one thread per output element, no atomics ----

struct ScatterState {
  ScatterIndex ix;
  int32_t dtype, index_dtype;
  int64_t total;
};

template <class I>
cudaError_t launch_scatter_i(const ScatterState& s, const void* const* in, void* const* out, cudaStream_t stream) {
  bool ok = visit_storage(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    scatter_add_kernel<T, I><<<grid_for(s.total), kBlock, 0, stream>>>(
        s.ix, static_cast<const T*>(in[0]), static_cast<const I*>(in[1]), static_cast<const T*>(in[2]),
        static_cast<T*>(out[0]), s.total);
  });
  if (!ok) return cudaErrorInvalidValue;
  return launched();
}

cudaError_t launch_scatter(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const ScatterState& s = plan.get<ScatterState>();
  if (s.total == 0) return cudaSuccess;
  return s.index_dtype == SPORA_DTYPE_I64 ? launch_scatter_i<int64_t>(s, in, out, stream)
                                          : launch_scatter_i<int32_t>(s, in, out, stream);
}

spora_plugin_error_t* plan_scatter(GpuPlan& gp) {
  const auto& p = gp.desc;  // validated by the reference planner
  auto s = std::make_shared<ScatterState>();
  s->ix = scatter_index_of(p);
  s->dtype = p.out[0].dtype;
  s->index_dtype = p.in[1].dtype;
  s->total = p.out[0].shape.numel();
  gp.state = s;
  gp.launch = launch_scatter;
  return nullptr;
}

}  // namespace

void add_indexing_kernels(std::vector<GpuKernelEntry>& out) {
  for (const char* op : {"one_hot", "gather", "embedding", "index_select"}) out.push_back({op, plan});
  out.push_back({"gather_nd", plan_gather});
  out.push_back({"gather_elements", plan_gather});
  out.push_back({"scatter_add", plan_scatter});
}

}  // namespace spora::gpu
