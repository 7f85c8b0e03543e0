// cumsum and topk: one thread per line running the sequential algorithm of
// math/scan_math.h, so sums and orders are the reference's bit for bit.
// (Lines are few when the axis is long; a parallel scan or selection is a
// later speed-up.)
#include <string>

#include "gpu_device.h"
#include "math/scan_math.h"

namespace spora::gpu {
namespace {

template <class T>
__global__ void cumsum_kernel(ScanIndex s, const T* x, T* y) {
  const int64_t lines = scan_lines(s);
  for (int64_t l = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; l < lines;
       l += static_cast<int64_t>(gridDim.x) * blockDim.x)
    cumsum_line<T>(s, x, y, l);
}

template <class T>
__global__ void topk_kernel(ScanIndex s, const T* x, T* values, int64_t* indices) {
  const int64_t lines = scan_lines(s);
  for (int64_t l = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; l < lines;
       l += static_cast<int64_t>(gridDim.x) * blockDim.x)
    topk_line<T>(s, x, values, indices, l);
}

struct ScanState {
  ScanIndex ix;
  bool topk;
  int32_t dtype;
};

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const ScanState& s = plan.get<ScanState>();
  const int64_t lines = scan_lines(s.ix);
  if (lines == 0 || s.ix.n == 0 || (s.topk && s.ix.k == 0)) return cudaSuccess;
  bool ok = false;
  visit_storage(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_of<T>;
    if constexpr (!is_bool_c<C>) {
      if (s.topk) {
        topk_kernel<T><<<grid_for(lines), kBlock, 0, stream>>>(s.ix, static_cast<const T*>(in[0]),
                                                               static_cast<T*>(out[0]), static_cast<int64_t*>(out[1]));
        ok = true;
      } else if constexpr (!std::is_same<C, uint8_t>::value) {
        cumsum_kernel<T><<<grid_for(lines), kBlock, 0, stream>>>(s.ix, static_cast<const T*>(in[0]),
                                                                 static_cast<T*>(out[0]));
        ok = true;
      }
    }
  });
  if (!ok) return cudaErrorInvalidValue;
  return launched();
}

spora_plugin_error_t* plan(GpuPlan& gp) {
  const auto& p = gp.desc;  // validated by the reference planner (dtypes, axis, k)
  auto s = std::make_shared<ScanState>();
  s->ix = scan_index_of(p);
  s->topk = p.op == "topk";
  s->dtype = p.in[0].dtype;
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

}  // namespace

void add_scan_kernels(std::vector<GpuKernelEntry>& out) {
  out.push_back({"cumsum", plan});
  out.push_back({"topk", plan});
}

}  // namespace spora::gpu
