// cuDNN batch norm (spatial mode): training, inference and backward; f16/bf16
// parameters and running statistics through float in the workspace. Each
// (dtype, mode) is probed once per device, training's numbers against a
// two-pass double computation.
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "gpu_dnn_lib.h"

namespace spora::gpu::dnn::detail {
namespace {

// Training batch norm checked against a two-pass double computation: one
// channel's mean is thousands of standard deviations from zero (where a
// one-pass E[x^2] - E[x]^2 in float is far off, and the reference computes
// two passes in double), and the running statistics' convention (factor,
// unbiased variance) is the reference's. T: data, P: parameters.
template <class T, class P>
cudnnStatus_t bn_training_check(cudnnHandle_t h, const Descs& d, char* scratch, cudaStream_t stream, bool dbl,
                                std::string* why) {
  constexpr int kN = 4, kC = 2, kS = 64, kM = kN * kS;
  constexpr double kEps = 1e-5, kFactor = 0.5;
  static_assert(sizeof(T) * kN * kC * kS <= kProbeSlot, "probe slot too small");
  std::vector<T> x(kN * kC * kS);
  std::vector<double> xv(x.size());
  for (int i = 0; i < kN * kC * kS; ++i) {
    const int c = i / kS % kC;
    x[static_cast<size_t>(i)] = elem<T>::store((c == 0 ? 1000.0 : -0.5) + (i * 37 % 101) / 101.0);
    xv[static_cast<size_t>(i)] = static_cast<double>(elem<T>::load(x[static_cast<size_t>(i)]));
  }
  const P ones[kC] = {P(1), P(1)}, zeros[kC] = {P(0), P(0)};
  const auto up = [&](int i, const void* src, size_t bytes) {
    return cudaMemcpyAsync(slot(scratch, i), src, bytes, cudaMemcpyHostToDevice, stream) == cudaSuccess;
  };
  if (!up(0, x.data(), x.size() * sizeof(T)) || !up(2, ones, sizeof ones) || !up(3, zeros, sizeof zeros) ||
      !up(4, ones, sizeof ones) || !up(5, ones, sizeof ones))
    return CUDNN_STATUS_EXECUTION_FAILED;
  const cudnnStatus_t st = g_lib.cudnnBatchNormalizationForwardTraining(
      h, CUDNN_BATCHNORM_SPATIAL, kScale.one(dbl), kScale.zero(dbl), d.x, slot(scratch, 0), d.x, slot(scratch, 1),
      d.param, slot(scratch, 2), slot(scratch, 3), kFactor, slot(scratch, 4), slot(scratch, 5), kEps, slot(scratch, 6),
      slot(scratch, 7));
  if (st != CUDNN_STATUS_SUCCESS) return st;
  P got[4][kC];  // saved mean, saved invstd, running mean, running variance
  for (int k = 0; k < 4; ++k)
    if (cudaMemcpyAsync(got[k], slot(scratch, k == 0 ? 6 : k == 1 ? 7 : k == 2 ? 4 : 5), sizeof got[k],
                        cudaMemcpyDeviceToHost, stream) != cudaSuccess)
      return CUDNN_STATUS_EXECUTION_FAILED;
  if (cudaStreamSynchronize(stream) != cudaSuccess) return CUDNN_STATUS_EXECUTION_FAILED;
  const double tol = dbl ? 1e-10 : 1e-4;
  for (int c = 0; c < kC; ++c) {
    double sum = 0, sq = 0;
    for (int n = 0; n < kN; ++n)
      for (int s = 0; s < kS; ++s) sum += xv[static_cast<size_t>((n * kC + c) * kS + s)];
    const double mean = sum / kM;
    for (int n = 0; n < kN; ++n)
      for (int s = 0; s < kS; ++s) {
        const double dv = xv[static_cast<size_t>((n * kC + c) * kS + s)] - mean;
        sq += dv * dv;
      }
    const double var = sq / kM;
    const double want[4] = {mean, 1.0 / std::sqrt(var + kEps), (1 - kFactor) + kFactor * mean,
                            (1 - kFactor) + kFactor * var * kM / (kM - 1)};
    static const char* const kWhat[4] = {"saved mean", "saved inverse std", "running mean", "running variance"};
    for (int k = 0; k < 4; ++k) {
      const double g = static_cast<double>(got[k][c]);
      if (!(std::fabs(g - want[k]) <= tol * (std::fabs(want[k]) + 1))) {
        *why = std::string("cudnnBatchNormalizationForwardTraining's ") + kWhat[k] + " is " + std::to_string(g) +
               ", the reference's " + std::to_string(want[k]) + " (probe)";
        return CUDNN_STATUS_SUCCESS;
      }
    }
  }
  return CUDNN_STATUS_SUCCESS;
}

// Batch norm: mode 0 inference, 1 training (numbers checked), 2 backward.
cudnnStatus_t probe_bn(cudnnHandle_t h, const TypeChoice& t, int mode, char* scratch, cudaStream_t stream,
                       std::string* why) {
  Descs d;
  const bool dbl = t.data == DataType::kDouble;
  cudnnStatus_t st = make_tensor(&d.x, t.data, mode == 1 ? Dims4{4, 2, 64, 1} : Dims4{2, 2, 2, 1});
  if (st == CUDNN_STATUS_SUCCESS) st = make_tensor(&d.param, t.bn_param, Dims4{1, 2, 1, 1});
  if (st != CUDNN_STATUS_SUCCESS) return st;
  const void *one = kScale.one(dbl), *zero = kScale.zero(dbl);
  char* x = slot(scratch, 0);
  if (mode == 1) {
    switch (t.data) {
      case DataType::kFloat: return bn_training_check<float, float>(h, d, scratch, stream, false, why);
      case DataType::kDouble: return bn_training_check<double, double>(h, d, scratch, stream, true, why);
      case DataType::kHalf: return bn_training_check<half_t, float>(h, d, scratch, stream, false, why);
      case DataType::kBfloat16: return bn_training_check<bhalf_t, float>(h, d, scratch, stream, false, why);
    }
    return CUDNN_STATUS_NOT_SUPPORTED;
  }
  if (mode == 0)
    return g_lib.cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, one, zero, d.x, x, d.x,
                                                         slot(scratch, 1), d.param, slot(scratch, 2), slot(scratch, 3),
                                                         slot(scratch, 4), slot(scratch, 5), 1e-5);
  return g_lib.cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, one, zero, one, zero, d.x, x, d.x,
                                               slot(scratch, 1), d.x, slot(scratch, 8), d.param, slot(scratch, 2),
                                               slot(scratch, 9), slot(scratch, 10), 1e-5, slot(scratch, 6),
                                               slot(scratch, 7));
}

struct BnState {
  Descs d;
  BnArgs a;
  TypeChoice t;
  int32_t dtype = 0;
};

cudaError_t launch_bn(const GpuPlan& plan, const void* const* in, void* const* out, void* workspace,
                      cudaStream_t stream) {
  const BnState& s = plan.get<BnState>();
  const BnArgs& a = s.a;
  const bool dbl = s.t.data == DataType::kDouble;
  const int64_t c = a.x.c;
  char* ws = static_cast<char*>(workspace);
  const auto param = [&](int64_t off, const void* direct) -> const void* {
    return a.convert ? static_cast<const void*>(ws + off) : direct;
  };
  const auto fparam = [&](int64_t off) { return reinterpret_cast<float*>(ws + off); };
  const size_t pbytes = static_cast<size_t>(c) * s.t.elem_size;
  // Parameters into float (f16/bf16), running stats into the outputs
  // cuDNN updates in place.
  if (a.convert) {
    if (cudaError_t e = to_float(s.dtype, in[a.backward ? 2 : 1], fparam(a.off_gamma), c, stream); e != cudaSuccess)
      return e;
    if (!a.backward) {
      for (auto [i, off] : {std::pair<int, int64_t>{2, a.off_beta}, {3, a.off_rmean}, {4, a.off_rvar}})
        if (cudaError_t e = to_float(s.dtype, in[i], fparam(off), c, stream); e != cudaSuccess) return e;
    }
  }
  if (!a.backward) {
    if (!a.training) {
      for (int i : {3, 4})
        if (out[i] != in[i])
          if (cudaError_t e = cudaMemcpyAsync(out[i], in[i], pbytes, cudaMemcpyDeviceToDevice, stream);
              e != cudaSuccess)
            return e;
      if (cudaError_t e = bn_inference_stats(s.dtype, in[3], in[4], a.eps, out[1], out[2], c, stream);
          e != cudaSuccess)
        return e;
    } else if (!a.convert) {
      for (int i : {3, 4})
        if (out[i] != in[i])
          if (cudaError_t e = cudaMemcpyAsync(out[i], in[i], pbytes, cudaMemcpyDeviceToDevice, stream);
              e != cudaSuccess)
            return e;
    }
  }
  const cudnnStatus_t st = on_stream(stream, [&](cudnnHandle_t h) {
    cudnnStatus_t called;
    const void* one = kScale.one(dbl);
    const void* zero = kScale.zero(dbl);
    if (a.backward) {
      void* dgamma = a.convert ? static_cast<void*>(fparam(a.off_dgamma)) : out[1];
      void* dbeta = a.convert ? static_cast<void*>(fparam(a.off_dbeta)) : out[2];
      // in: x, dy, gamma, mean, invstd (the saved statistics, compute dtype).
      called = g_lib.cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, one, zero, one, zero, s.d.x, in[0],
                                                     s.d.x, in[1], s.d.x, out[0], s.d.param,
                                                     param(a.off_gamma, in[2]), dgamma, dbeta, a.eps, in[3], in[4]);
    } else if (a.training) {
      void* rmean = a.convert ? static_cast<void*>(fparam(a.off_rmean)) : out[3];
      void* rvar = a.convert ? static_cast<void*>(fparam(a.off_rvar)) : out[4];
      called = g_lib.cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, one, zero, s.d.x, in[0], s.d.x,
                                                            out[0], s.d.param, param(a.off_gamma, in[1]),
                                                            param(a.off_beta, in[2]), a.momentum, rmean, rvar, a.eps,
                                                            out[1], out[2]);
    } else {
      called = g_lib.cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, one, zero, s.d.x, in[0], s.d.x,
                                                             out[0], s.d.param, param(a.off_gamma, in[1]),
                                                             param(a.off_beta, in[2]), param(a.off_rmean, in[3]),
                                                             param(a.off_rvar, in[4]), a.eps);
    }
    return called;
  });
  if (st != CUDNN_STATUS_SUCCESS) return launch_error(st);
  if (a.convert && a.backward) {
    if (cudaError_t e = from_float(s.dtype, fparam(a.off_dgamma), out[1], c, stream); e != cudaSuccess) return e;
    return from_float(s.dtype, fparam(a.off_dbeta), out[2], c, stream);
  }
  if (a.convert && a.training) {
    if (cudaError_t e = from_float(s.dtype, fparam(a.off_rmean), out[3], c, stream); e != cudaSuccess) return e;
    return from_float(s.dtype, fparam(a.off_rvar), out[4], c, stream);
  }
  return cudaSuccess;
}

}  // namespace

spora_plugin_error_t* plan_bn(GpuPlan& gp, const TypeChoice& t) {
  auto s = std::make_shared<BnState>();
  s->t = t;
  s->dtype = gp.desc.in[0].dtype;
  if (std::string why = bn_args_of(gp.desc, t, &s->a); !why.empty()) return spora::plugin::unsupported(gp.desc, why);
  const BnArgs& a = s->a;
  Descs& d = s->d;
  SPORA_CUDNN_PLAN(make_tensor(&d.x, t.data, a.x));
  // Spatial mode's [1, C, 1, 1] in float (double for double data), the
  // type cudnnDeriveBNTensorDescriptor would give.
  SPORA_CUDNN_PLAN(make_tensor(&d.param, t.bn_param, Dims4{1, a.x.c, 1, 1}));
  const int mode = a.backward ? 2 : a.training ? 1 : 0;
  if (auto* e = probe(gp,
                      mode == 2   ? "cudnnBatchNormalizationBackward"
                      : mode == 1 ? "cudnnBatchNormalizationForwardTraining"
                                  : "cudnnBatchNormalizationForwardInference",
                      probe_bn, t, mode))
    return e;
  gp.workspace = a.workspace;
  gp.state = s;
  gp.launch = launch_bn;
  return nullptr;
}

}  // namespace spora::gpu::dnn::detail
