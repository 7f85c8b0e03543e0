// cuDNN convolution: forward (conv2d, conv2d_bias, conv2d_act,
// conv2d_add_act), backward-data (conv2d_grad_input, conv2d_transpose),
// backward-filter (conv2d_grad_weight). The algorithm is picked by cuDNN's
// heuristics once per signature (cached) and sizes the plan's workspace.
#include <map>
#include <memory>
#include <vector>

#include "gpu_dnn_lib.h"
#include "math/gemm_math.h"

namespace spora::gpu::dnn::detail {
namespace {

// Convolution algorithms by signature (device first), chosen once.
std::mutex g_algo_mu;
std::map<std::vector<int64_t>, AlgoChoice> g_algos;

struct ConvState {
  Descs d;
  ConvArgs a;
  TypeChoice t;
  int32_t dtype = 0;
  AlgoChoice algo;
  bool use_ep = false;
  GemmEpilogue ep;
};

template <class Perf>
std::vector<AlgoPerf> perfs_of(const Perf* p, int n) {
  std::vector<AlgoPerf> v;
  for (int i = 0; i < n; ++i)
    v.push_back({static_cast<int>(p[i].algo), static_cast<int>(p[i].status), p[i].memory,
                 static_cast<MathType>(static_cast<int>(p[i].mathType))});
  return v;
}

// Runs cuDNN's heuristics for the state's call (g_mu held) and confirms the
// chosen algorithm's workspace with the math type set.
spora_plugin_error_t* find_algo(GpuPlan& gp, cudnnHandle_t h, ConvState& s) {
  const Descs& d = s.d;
  std::vector<AlgoPerf> perfs;
  int n = 0;
  if (s.a.call == ConvCall::kForward) {
    cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    SPORA_CUDNN_PLAN(g_lib.cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y,
                                                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, p));
    perfs = perfs_of(p, n);
  } else if (s.a.call == ConvCall::kBackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    SPORA_CUDNN_PLAN(g_lib.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x,
                                                                       CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, p));
    perfs = perfs_of(p, n);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    SPORA_CUDNN_PLAN(g_lib.cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        h, d.x, d.y, d.conv, d.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, p));
    perfs = perfs_of(p, n);
  }
  AlgoChoice c;
  if (!choose_algo(perfs, s.t, kWorkspaceCap, &c))
    return spora::plugin::unsupported(gp.desc, "cuDNN offers no algorithm for it" +
                                                   std::string(s.t.fma_only ? " with FMA math" : "") +
                                                   " within a " + std::to_string(kWorkspaceCap >> 20) +
                                                   " MiB workspace");
  SPORA_CUDNN_PLAN(g_lib.cudnnSetConvolutionMathType(d.conv, static_cast<cudnnMathType_t>(static_cast<int>(c.math))));
  size_t bytes = 0;
  if (s.a.call == ConvCall::kForward)
    SPORA_CUDNN_PLAN(g_lib.cudnnGetConvolutionForwardWorkspaceSize(
        h, d.x, d.w, d.conv, d.y, static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), &bytes));
  else if (s.a.call == ConvCall::kBackwardData)
    SPORA_CUDNN_PLAN(g_lib.cudnnGetConvolutionBackwardDataWorkspaceSize(
        h, d.w, d.y, d.conv, d.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), &bytes));
  else
    SPORA_CUDNN_PLAN(g_lib.cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, d.x, d.y, d.conv, d.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), &bytes));
  if (bytes > c.workspace) c.workspace = bytes;
  s.algo = c;
  return nullptr;
}

cudaError_t launch_conv(const GpuPlan& plan, const void* const* in, void* const* out, void* workspace,
                        cudaStream_t stream) {
  const ConvState& s = plan.get<ConvState>();
  const ConvArgs& a = s.a;
  const bool dbl = s.t.data == DataType::kDouble;
  const void* beta = kScale.zero(dbl);
  if (a.bias_input >= 0) {
    // y = bias, then y = conv + y (beta = 1): one rounding, as the reference.
    if (cudaError_t e = fill_bias(s.dtype, out[a.ys.index], in[a.bias_input], a.y.n, a.y.c,
                                  int64_t{a.y.h} * a.y.w, stream);
        e != cudaSuccess)
      return e;
    beta = kScale.one(dbl);
  }
  const cudnnStatus_t st = on_stream(stream, [&](cudnnHandle_t h) {
    const void* x = operand(a.xs, in, out);
    const void* w = operand(a.ws, in, out);
    const void* y = operand(a.ys, in, out);
    const size_t ws = s.algo.workspace;
    if (a.call == ConvCall::kForward)
      return g_lib.cudnnConvolutionForward(h, kScale.one(dbl), s.d.x, x, s.d.w, w, s.d.conv,
                                           static_cast<cudnnConvolutionFwdAlgo_t>(s.algo.algo), workspace, ws, beta,
                                           s.d.y, const_cast<void*>(y));
    if (a.call == ConvCall::kBackwardData)
      return g_lib.cudnnConvolutionBackwardData(h, kScale.one(dbl), s.d.w, w, s.d.y, y, s.d.conv,
                                                static_cast<cudnnConvolutionBwdDataAlgo_t>(s.algo.algo), workspace,
                                                ws, beta, s.d.x, const_cast<void*>(x));
    return g_lib.cudnnConvolutionBackwardFilter(h, kScale.one(dbl), s.d.x, x, s.d.y, y, s.d.conv,
                                                static_cast<cudnnConvolutionBwdFilterAlgo_t>(s.algo.algo), workspace,
                                                ws, beta, s.d.w, const_cast<void*>(w));
  });
  if (st != CUDNN_STATUS_SUCCESS) return launch_error(st);
  if (!s.use_ep) return cudaSuccess;
  return apply_epilogue(s.dtype, s.ep, out[a.ys.index], a.residual_input >= 0 ? in[a.residual_input] : nullptr,
                        a.y.numel(), stream);
}

}  // namespace

spora_plugin_error_t* plan_conv(GpuPlan& gp, const TypeChoice& dtype_types) {
  auto s = std::make_shared<ConvState>();
  s->dtype = gp.desc.out[0].dtype;
  // The user's convolution precision (the core adds "conv_precision" to the
  // descriptor only when it is not "highest"): f32 under "high" may use TF32.
  const std::string pv = gp.desc.attrs.get_string("conv_precision", "highest");
  ConvPrecision prec;
  if (!conv_precision_of(pv, &prec))
    return spora::plugin::invalid(gp.desc, "conv_precision must be \"highest\" or \"high\", got \"" + pv + "\"");
  s->t = conv_type_choice(dtype_types, gp.desc.in[0].dtype, prec);
  const TypeChoice& t = s->t;
  if (std::string why = conv_args_of(gp.desc, &s->a); !why.empty()) return spora::plugin::unsupported(gp.desc, why);
  const ConvArgs& a = s->a;
  if (a.epilogue()) {
    if (!gemm_epilogue_of(a.activation, a.residual_input >= 0, &s->ep))
      return spora::plugin::unsupported(gp.desc, "unknown activation \"" + a.activation + "\"");
    s->use_ep = true;
  }
  Descs& d = s->d;
  SPORA_CUDNN_PLAN(make_tensor(&d.x, t.data, a.x));
  SPORA_CUDNN_PLAN(make_tensor(&d.y, t.data, a.y));
  SPORA_CUDNN_PLAN(g_lib.cudnnCreateFilterDescriptor(&d.w));
  SPORA_CUDNN_PLAN(g_lib.cudnnSetFilter4dDescriptor(d.w, data_type(t.data), CUDNN_TENSOR_NCHW, a.w.n, a.w.c, a.w.h, a.w.w));
  SPORA_CUDNN_PLAN(g_lib.cudnnCreateConvolutionDescriptor(&d.conv));
  // The reference computes y[o] = sum w[i] x[o*s + i*d - pad]: cross-correlation.
  SPORA_CUDNN_PLAN(g_lib.cudnnSetConvolution2dDescriptor(d.conv, a.pad[0], a.pad[1], a.stride[0], a.stride[1], a.dil[0],
                                                         a.dil[1], CUDNN_CROSS_CORRELATION, data_type(t.compute)));
  SPORA_CUDNN_PLAN(g_lib.cudnnSetConvolutionGroupCount(d.conv, a.groups));
  SPORA_CUDNN_PLAN(g_lib.cudnnSetConvolutionMathType(d.conv, static_cast<cudnnMathType_t>(static_cast<int>(t.math))));

  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return spora::plugin::unsupported(gp.desc, "no current device");
  std::vector<int64_t> key = conv_signature(a, s->dtype, t);
  key.insert(key.begin(), device);
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(g_algo_mu);
    auto it = g_algos.find(key);
    if (it != g_algos.end()) {
      s->algo = it->second;
      cached = true;
    }
  }
  if (cached) {
    SPORA_CUDNN_PLAN(
        g_lib.cudnnSetConvolutionMathType(d.conv, static_cast<cudnnMathType_t>(static_cast<int>(s->algo.math))));
  } else {
    {
      std::lock_guard<std::mutex> lock(g_mu);
      cudnnHandle_t h = nullptr;
      SPORA_CUDNN_PLAN(handle_locked(&h));
      if (auto* e = find_algo(gp, h, *s)) return e;
    }
    std::lock_guard<std::mutex> lock(g_algo_mu);
    g_algos[key] = s->algo;
  }
  gp.workspace = s->algo.workspace;
  gp.state = s;
  gp.launch = launch_conv;
  return nullptr;
}

}  // namespace spora::gpu::dnn::detail
