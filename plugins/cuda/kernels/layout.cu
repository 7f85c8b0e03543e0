// Layout and creation ops. The strided-copy family (transpose,
// broadcast_to, tile, flip, slice, strided_slice) runs the reference's
// planned affine map (math/copy_math.h) per element, one kernel per element
// size; concat/stack/split are 2-D memcpys of the reference's row plan;
// zeros/ones/full fill the dtype's bit pattern.
#include <cstring>
#include <string>

#include "gpu_device.h"
#include "math/copy_math.h"

namespace spora::gpu {
namespace {

namespace ref = spora::plugin;

template <class U>
__global__ void copy_kernel(CopyIndex c, const U* x, U* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < c.numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = x[copy_offset(c, i)];
}

template <class U>
__global__ void fill_kernel(U value, U* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = value;
}

struct CopyState {
  CopyIndex c;
  int64_t elem;
};

cudaError_t launch_copy(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const CopyState& s = plan.get<CopyState>();
  if (s.c.numel == 0) return cudaSuccess;
  const unsigned grid = grid_for(s.c.numel);
  switch (s.elem) {
    case 1: copy_kernel<uint8_t><<<grid, kBlock, 0, stream>>>(s.c, static_cast<const uint8_t*>(in[0]), static_cast<uint8_t*>(out[0])); break;
    case 2: copy_kernel<uint16_t><<<grid, kBlock, 0, stream>>>(s.c, static_cast<const uint16_t*>(in[0]), static_cast<uint16_t*>(out[0])); break;
    case 4: copy_kernel<uint32_t><<<grid, kBlock, 0, stream>>>(s.c, static_cast<const uint32_t*>(in[0]), static_cast<uint32_t*>(out[0])); break;
    case 8: copy_kernel<uint64_t><<<grid, kBlock, 0, stream>>>(s.c, static_cast<const uint64_t*>(in[0]), static_cast<uint64_t*>(out[0])); break;
    default: return cudaErrorInvalidValue;
  }
  return launched();
}

spora_plugin_error_t* plan_copy(GpuPlan& gp) {
  // The reference planner kept its StridedCopy (bounds already checked).
  const auto* sc = static_cast<const ref::StridedCopy*>(gp.desc.state.get());
  if (!sc) return ref::unsupported(gp.desc, "no strided-copy plan");
  auto s = std::make_shared<CopyState>();
  s->c = copy_index_of(*sc);
  s->elem = sc->elem;
  gp.state = s;
  gp.launch = launch_copy;
  return nullptr;
}

// concat/stack join rows of the parts into whole rows; split does the
// reverse: one 2-D copy per part.
cudaError_t launch_rows(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const auto& r = plan.get<ref::RowCopy>();
  if (r.rows == 0) return cudaSuccess;
  for (int i = 0; i < r.parts; ++i) {
    if (r.width[i] == 0) continue;
    const size_t w = static_cast<size_t>(r.width[i]), total = static_cast<size_t>(r.total);
    cudaError_t e;
    if (r.join)
      e = cudaMemcpy2DAsync(static_cast<char*>(out[0]) + r.offset[i], total, in[i], w, w,
                            static_cast<size_t>(r.rows), cudaMemcpyDeviceToDevice, stream);
    else
      e = cudaMemcpy2DAsync(out[i], w, static_cast<const char*>(in[0]) + r.offset[i], total, w,
                            static_cast<size_t>(r.rows), cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

spora_plugin_error_t* plan_rows(GpuPlan& gp) {
  if (!gp.desc.state) return ref::unsupported(gp.desc, "no row-copy plan");
  gp.state = gp.desc.state;  // the reference's RowCopy, immutable
  gp.launch = launch_rows;
  return nullptr;
}

struct FillState {
  uint64_t bits;
  int64_t elem, n;
};

cudaError_t launch_fill(const GpuPlan& plan, const void* const*, void* const* out, void*, cudaStream_t stream) {
  const FillState& s = plan.get<FillState>();
  if (s.n == 0) return cudaSuccess;
  const unsigned grid = grid_for(s.n);
  switch (s.elem) {
    case 1: fill_kernel<uint8_t><<<grid, kBlock, 0, stream>>>(static_cast<uint8_t>(s.bits), static_cast<uint8_t*>(out[0]), s.n); break;
    case 2: fill_kernel<uint16_t><<<grid, kBlock, 0, stream>>>(static_cast<uint16_t>(s.bits), static_cast<uint16_t*>(out[0]), s.n); break;
    case 4: fill_kernel<uint32_t><<<grid, kBlock, 0, stream>>>(static_cast<uint32_t>(s.bits), static_cast<uint32_t*>(out[0]), s.n); break;
    case 8: fill_kernel<uint64_t><<<grid, kBlock, 0, stream>>>(s.bits, static_cast<uint64_t*>(out[0]), s.n); break;
    default: return cudaErrorInvalidValue;
  }
  return launched();
}

spora_plugin_error_t* plan_fill(GpuPlan& gp) {
  const auto& p = gp.desc;
  const double v = p.op == "zeros" ? 0.0 : p.op == "ones" ? 1.0 : p.attrs.get_float("value", 0.0);
  auto s = std::make_shared<FillState>();
  s->bits = 0;
  if (p.out[0].dtype == SPORA_DTYPE_BOOL) s->bits = v != 0;  // as the reference: any nonzero is true
  else if (!ref::encode_value(p.out[0].dtype, v, &s->bits)) return ref::invalid(p, "value does not fit the dtype");
  s->elem = static_cast<int64_t>(ref::dtype_size(p.out[0].dtype));
  s->n = p.out[0].shape.numel();
  gp.state = s;
  gp.launch = launch_fill;
  return nullptr;
}

}  // namespace

void add_layout_kernels(std::vector<GpuKernelEntry>& out) {
  for (const char* op : {"transpose", "broadcast_to", "tile", "flip", "slice", "strided_slice"}) out.push_back({op, plan_copy});
  for (const char* op : {"concat", "stack", "split"}) out.push_back({op, plan_rows});
  for (const char* op : {"zeros", "ones", "full"}) out.push_back({op, plan_fill});
}

}  // namespace spora::gpu
