// cuDNN pooling: max_pool2d (then the -inf repair of dnn_epilogue.cu),
// avg_pool2d, adaptive_avg_pool2d (even bins) and the average gradients;
// each (dtype, mode, direction) probed once per device.
#include <memory>

#include "gpu_dnn_lib.h"

namespace spora::gpu::dnn::detail {
namespace {

// Pooling x [1,1,2,2] -> y [1,1,1,1] in `mode`, forward or backward.
cudnnStatus_t probe_pool(cudnnHandle_t h, const TypeChoice& t, int mode, char* scratch, bool backward) {
  Descs d;
  const bool dbl = t.data == DataType::kDouble;
  cudnnStatus_t st = make_tensor(&d.x, t.data, Dims4{1, 1, 2, 2});
  if (st == CUDNN_STATUS_SUCCESS) st = make_tensor(&d.y, t.data, Dims4{1, 1, 1, 1});
  if (st == CUDNN_STATUS_SUCCESS) st = g_lib.cudnnCreatePoolingDescriptor(&d.pool);
  if (st == CUDNN_STATUS_SUCCESS)
    st = g_lib.cudnnSetPooling2dDescriptor(d.pool, static_cast<cudnnPoolingMode_t>(mode), CUDNN_PROPAGATE_NAN, 2, 2,
                                           0, 0, 2, 2);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (!backward)
    return g_lib.cudnnPoolingForward(h, d.pool, kScale.one(dbl), d.x, slot(scratch, 0), kScale.zero(dbl), d.y,
                                     slot(scratch, 1));
  return g_lib.cudnnPoolingBackward(h, d.pool, kScale.one(dbl), d.y, slot(scratch, 1), d.y, slot(scratch, 2), d.x,
                                    slot(scratch, 0), kScale.zero(dbl), d.x, slot(scratch, 3));
}
cudnnStatus_t probe_pool_forward(cudnnHandle_t h, const TypeChoice& t, int mode, char* scratch, cudaStream_t,
                                 std::string*) {
  return probe_pool(h, t, mode, scratch, false);
}
cudnnStatus_t probe_pool_backward(cudnnHandle_t h, const TypeChoice& t, int mode, char* scratch, cudaStream_t,
                                  std::string*) {
  return probe_pool(h, t, mode, scratch, true);
}

struct PoolState {
  Descs d;
  PoolArgs a;
  TypeChoice t;
  int32_t dtype = 0;
};

cudaError_t launch_pool(const GpuPlan& plan, const void* const* in, void* const* out, void* workspace,
                        cudaStream_t stream) {
  const PoolState& s = plan.get<PoolState>();
  const bool dbl = s.t.data == DataType::kDouble;
  const cudnnStatus_t st = on_stream(stream, [&](cudnnHandle_t h) {
    cudnnStatus_t called;
    if (!s.a.backward) {
      called = g_lib.cudnnPoolingForward(h, s.d.pool, kScale.one(dbl), s.d.x, in[s.a.xs.index], kScale.zero(dbl), s.d.y,
                                         out[s.a.ys.index]);
    } else {
      // Average pooling: y and x are not read for their values (dnn_args.h).
      const void* dy = in[s.a.ys.index];
      called = g_lib.cudnnPoolingBackward(h, s.d.pool, kScale.one(dbl), s.d.y, dy, s.d.y, dy, s.d.x, workspace,
                                          kScale.zero(dbl), s.d.x, out[s.a.xs.index]);
    }
    return called;
  });
  if (st != CUDNN_STATUS_SUCCESS) return launch_error(st);
  if (s.a.mode != PoolMode::kMax) return cudaSuccess;
  return max_pool_fixup(s.dtype, pool_fix_of(s.a), in[s.a.xs.index], out[s.a.ys.index], int64_t{s.a.x.n} * s.a.x.c,
                        stream);
}

}  // namespace

spora_plugin_error_t* plan_pool(GpuPlan& gp, const TypeChoice& t) {
  auto s = std::make_shared<PoolState>();
  s->t = t;
  s->dtype = gp.desc.in[0].dtype;
  if (std::string why = pool_args_of(gp.desc, &s->a); !why.empty()) return spora::plugin::unsupported(gp.desc, why);
  const PoolArgs& a = s->a;
  Descs& d = s->d;
  SPORA_CUDNN_PLAN(make_tensor(&d.x, t.data, a.x));
  SPORA_CUDNN_PLAN(make_tensor(&d.y, t.data, a.y));
  SPORA_CUDNN_PLAN(g_lib.cudnnCreatePoolingDescriptor(&d.pool));
  // NaN propagates, as the reference's max (a NaN wins).
  SPORA_CUDNN_PLAN(g_lib.cudnnSetPooling2dDescriptor(d.pool, static_cast<cudnnPoolingMode_t>(static_cast<int>(a.mode)),
                                                     CUDNN_PROPAGATE_NAN, a.window[0], a.window[1], a.pad[0], a.pad[1],
                                                     a.stride[0], a.stride[1]));
  if (auto* e = probe(gp, a.backward ? "cudnnPoolingBackward" : "cudnnPoolingForward",
                      a.backward ? probe_pool_backward : probe_pool_forward, t, static_cast<int>(a.mode)))
    return e;
  gp.workspace = pool_workspace(a, t);
  gp.state = s;
  gp.launch = launch_pool;
  return nullptr;
}

}  // namespace spora::gpu::dnn::detail
