// Elementwise kernels: unary, binary (numpy broadcasting), comparisons,
// where and cast. The arithmetic is math/ew_math.h; here only the
// grid-stride loops and the host-side plan and dispatch. One kernel per
// dtype (the op is a runtime switch, uniform across a warp), 64 small cast
// kernels for every dtype pair.
#include <cmath>
#include <string>

#include "gpu_device.h"
#include "kernels/elementwise.h"  // plugins/common: the op table
#include "math/ew_plan.h"

namespace spora::gpu {
namespace {

namespace ref = spora::plugin::ew;

template <class T>
__global__ void unary_kernel(EwOp op, EwParams p, const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = elem<T>::store(ew_unary<compute_of<T>>(op, elem<T>::load(x[i]), p));
}

template <class T>
__global__ void arith_kernel(EwOp op, EwIndex ix, const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[kEwMaxIn];
    ew_offsets(ix, i, off);
    y[i] = elem<T>::store(ew_arith<compute_of<T>>(op, elem<T>::load(a[off[0]]), elem<T>::load(b[off[1]])));
  }
}

template <class T>
__global__ void compare_kernel(EwOp op, EwIndex ix, const T* a, const T* b, bool_t* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[kEwMaxIn];
    ew_offsets(ix, i, off);
    y[i] = bool_t{static_cast<uint8_t>(ew_compare<compute_of<T>>(op, elem<T>::load(a[off[0]]), elem<T>::load(b[off[1]])))};
  }
}

// where moves bits: one kernel per element size.
template <class U>
__global__ void where_kernel(EwIndex ix, const bool_t* c, const U* x, const U* y, U* z, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[kEwMaxIn];
    ew_offsets(ix, i, off);
    z[i] = c[off[0]].v ? x[off[1]] : y[off[2]];
  }
}

template <class TI, class TO>
__global__ void cast_kernel(const TI* x, TO* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = cast_elem<TI, TO>(x[i]);
}

enum class Form { kUnary, kArith, kCompare, kWhere, kCast };

struct EwState {
  Form form;
  EwOp op;
  EwParams prm;
  EwIndex ix;
  int64_t n;
  int32_t dtype;  // unary/binary: the operands'; where: x's; cast: the source's
  int32_t to;     // cast: the target dtype
};

cudaError_t launch(const GpuPlan& plan, const void* const* in, void* const* out, void*, cudaStream_t stream) {
  const EwState& s = plan.get<EwState>();
  if (s.n == 0) return cudaSuccess;
  const unsigned grid = grid_for(s.n);
  bool known = true;
  switch (s.form) {
    case Form::kUnary:
      known = visit_storage(s.dtype, [&](auto tag) {
        using T = decltype(tag);
        unary_kernel<T><<<grid, kBlock, 0, stream>>>(s.op, s.prm, static_cast<const T*>(in[0]), static_cast<T*>(out[0]), s.n);
      });
      break;
    case Form::kArith:
      known = visit_storage(s.dtype, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_same<T, bool_t>::value)
          arith_kernel<T><<<grid, kBlock, 0, stream>>>(s.op, s.ix, static_cast<const T*>(in[0]),
                                                       static_cast<const T*>(in[1]), static_cast<T*>(out[0]), s.n);
      });
      break;
    case Form::kCompare:
      known = visit_storage(s.dtype, [&](auto tag) {
        using T = decltype(tag);
        compare_kernel<T><<<grid, kBlock, 0, stream>>>(s.op, s.ix, static_cast<const T*>(in[0]),
                                                       static_cast<const T*>(in[1]), static_cast<bool_t*>(out[0]), s.n);
      });
      break;
    case Form::kWhere: {
      const auto* c = static_cast<const bool_t*>(in[0]);
      switch (spora::plugin::dtype_size(s.dtype)) {
        case 1: where_kernel<uint8_t><<<grid, kBlock, 0, stream>>>(s.ix, c, static_cast<const uint8_t*>(in[1]), static_cast<const uint8_t*>(in[2]), static_cast<uint8_t*>(out[0]), s.n); break;
        case 2: where_kernel<uint16_t><<<grid, kBlock, 0, stream>>>(s.ix, c, static_cast<const uint16_t*>(in[1]), static_cast<const uint16_t*>(in[2]), static_cast<uint16_t*>(out[0]), s.n); break;
        case 4: where_kernel<uint32_t><<<grid, kBlock, 0, stream>>>(s.ix, c, static_cast<const uint32_t*>(in[1]), static_cast<const uint32_t*>(in[2]), static_cast<uint32_t*>(out[0]), s.n); break;
        case 8: where_kernel<uint64_t><<<grid, kBlock, 0, stream>>>(s.ix, c, static_cast<const uint64_t*>(in[1]), static_cast<const uint64_t*>(in[2]), static_cast<uint64_t*>(out[0]), s.n); break;
        default: known = false;
      }
      break;
    }
    case Form::kCast:
      known = visit_storage(s.dtype, [&](auto ti) {
        known = visit_storage(s.to, [&](auto to) {
          using TI = decltype(ti);
          using TO = decltype(to);
          cast_kernel<TI, TO><<<grid, kBlock, 0, stream>>>(static_cast<const TI*>(in[0]), static_cast<TO*>(out[0]), s.n);
        });
      }) && known;
      break;
  }
  if (!known) return cudaErrorInvalidValue;  // unreachable: plan checked the dtypes
  return launched();
}

spora_plugin_error_t* plan(GpuPlan& gp) {
  const auto& p = gp.desc;  // already validated by the reference planner
  auto s = std::make_shared<EwState>();
  s->n = p.out[0].shape.numel();
  s->op = EwOp::kNeg;
  s->prm = ew_params_of(p.attrs);
  if (p.op == "cast") {
    s->form = Form::kCast;
    s->dtype = p.in[0].dtype;
    s->to = p.out[0].dtype;
  } else if (p.op == "where") {
    s->form = Form::kWhere;
    s->dtype = p.in[1].dtype;
  } else {
    if (!ew_op_of(p.op, &s->op)) return spora::plugin::unsupported(p, "not an elementwise op");
    s->dtype = p.in[0].dtype;
    s->form = s->op < EwOp::kAdd ? Form::kUnary : ew_is_compare(s->op) ? Form::kCompare : Form::kArith;
  }
  if (s->form != Form::kUnary && s->form != Form::kCast) {
    spora::plugin::Shape shapes[kEwMaxIn];
    for (int i = 0; i < p.num_inputs; ++i) shapes[i] = p.in[i].shape;
    s->ix = ew_index_of(p.out[0].shape, shapes, p.num_inputs);
  }
  gp.state = s;
  gp.launch = launch;
  return nullptr;
}

}  // namespace

void add_elementwise_kernels(std::vector<GpuKernelEntry>& out) {
  for (int i = 0; i < ref::kNumOps; ++i) out.push_back({ref::kOps[i].name, plan});
}

}  // namespace spora::gpu
