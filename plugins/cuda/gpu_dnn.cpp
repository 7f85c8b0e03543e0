// cuDNN 9's legacy API behind the CUDA plugin's convolution, pooling and
// batch norm. The headers give the types, the function types (decltype)
// and the version only: every entry point is looked up with dlsym.
//
// Plan time (kernel_create, a host thread with the device current): the
// arguments come from math/dnn_args.h, which refuses what cuDNN cannot
// reproduce exactly; descriptors are made and kept in the plan's state;
// convolutions pick their algorithm with cuDNN's heuristics once per
// signature (cached) and size the plan's workspace with it. Launch: the
// device's handle is bound to the stream under a lock and the call made; a
// failed status becomes a cudaError the executor reports.
#include "gpu_dnn.h"

#include <cudnn.h>
#include <dlfcn.h>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "math/dnn_args.h"
#include "math/gemm_math.h"

namespace spora::gpu::dnn {

// dnn_args.h mirrors these enums without including cuDNN.
static_assert(static_cast<int>(DataType::kFloat) == CUDNN_DATA_FLOAT);
static_assert(static_cast<int>(DataType::kDouble) == CUDNN_DATA_DOUBLE);
static_assert(static_cast<int>(DataType::kHalf) == CUDNN_DATA_HALF);
static_assert(static_cast<int>(DataType::kBfloat16) == CUDNN_DATA_BFLOAT16);
static_assert(static_cast<int>(MathType::kDefault) == CUDNN_DEFAULT_MATH);
static_assert(static_cast<int>(MathType::kTensorOp) == CUDNN_TENSOR_OP_MATH);
static_assert(static_cast<int>(MathType::kTensorOpAllowConversion) == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
static_assert(static_cast<int>(MathType::kFma) == CUDNN_FMA_MATH);
static_assert(static_cast<int>(PoolMode::kMax) == CUDNN_POOLING_MAX_DETERMINISTIC);
static_assert(static_cast<int>(PoolMode::kAvgIncludePad) == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING);
static_assert(static_cast<int>(PoolMode::kAvgExcludePad) == CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING);
static_assert(CUDNN_STATUS_SUCCESS == 0);

namespace {

// Every entry point the plugin calls.
#define SPORA_CUDNN_FUNCTIONS(X)                                                                               \
  X(cudnnGetVersion)                                                                                          \
  X(cudnnGetErrorString)                                                                                      \
  X(cudnnCreate)                                                                                              \
  X(cudnnDestroy)                                                                                             \
  X(cudnnSetStream)                                                                                           \
  X(cudnnCreateTensorDescriptor)                                                                              \
  X(cudnnSetTensor4dDescriptorEx)                                                                             \
  X(cudnnDestroyTensorDescriptor)                                                                             \
  X(cudnnCreateFilterDescriptor)                                                                              \
  X(cudnnSetFilter4dDescriptor)                                                                               \
  X(cudnnDestroyFilterDescriptor)                                                                             \
  X(cudnnCreateConvolutionDescriptor)                                                                         \
  X(cudnnSetConvolution2dDescriptor)                                                                          \
  X(cudnnSetConvolutionGroupCount)                                                                            \
  X(cudnnSetConvolutionMathType)                                                                              \
  X(cudnnDestroyConvolutionDescriptor)                                                                        \
  X(cudnnGetConvolutionForwardAlgorithm_v7)                                                                   \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)                                                              \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)                                                            \
  X(cudnnGetConvolutionForwardWorkspaceSize)                                                                  \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize)                                                             \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize)                                                           \
  X(cudnnConvolutionForward)                                                                                  \
  X(cudnnConvolutionBackwardData)                                                                             \
  X(cudnnConvolutionBackwardFilter)                                                                           \
  X(cudnnCreatePoolingDescriptor)                                                                             \
  X(cudnnSetPooling2dDescriptor)                                                                              \
  X(cudnnDestroyPoolingDescriptor)                                                                            \
  X(cudnnPoolingForward)                                                                                      \
  X(cudnnPoolingBackward)                                                                                     \
  X(cudnnBatchNormalizationForwardTraining)                                                                   \
  X(cudnnBatchNormalizationForwardInference)                                                                  \
  X(cudnnBatchNormalizationBackward)

struct Lib {
#define SPORA_CUDNN_MEMBER(f) decltype(&::f) f = nullptr;
  SPORA_CUDNN_FUNCTIONS(SPORA_CUDNN_MEMBER)
#undef SPORA_CUDNN_MEMBER
};

Lib g_lib;
bool g_loaded = false;  // written once by load() (host thread, initialize) before any kernel is planned
std::string g_why = "cuDNN was not loaded";

// One handle per device, made on first use; a handle's stream binding and
// call must not interleave with another thread's, hence the lock per call.
std::mutex g_mu;
std::map<int, cudnnHandle_t> g_handles;

// Convolution algorithms by signature (device first), chosen once.
std::mutex g_algo_mu;
std::map<std::vector<int64_t>, AlgoChoice> g_algos;

std::string status_text(cudnnStatus_t st) {
  const char* s = g_lib.cudnnGetErrorString ? g_lib.cudnnGetErrorString(st) : nullptr;
  return (s ? std::string(s) : "cuDNN status") + " (" + std::to_string(static_cast<int>(st)) + ")";
}

// A launch's failed status as the executor's error.
cudaError_t launch_error(cudnnStatus_t st) {
  switch (CUDNN_STATUS_CATEGORY(st)) {
    case CUDNN_STATUS_SUCCESS: return cudaSuccess;
    case CUDNN_STATUS_NOT_SUPPORTED: return cudaErrorNotSupported;
    case CUDNN_STATUS_EXECUTION_FAILED: return cudaErrorLaunchFailure;
    case CUDNN_STATUS_INTERNAL_ERROR: return cudaErrorUnknown;
    default: return cudaErrorInvalidValue;
  }
}

// The current device's handle; g_mu must be held.
cudnnStatus_t handle_locked(cudnnHandle_t* out) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return CUDNN_STATUS_INTERNAL_ERROR;
  auto it = g_handles.find(device);
  if (it == g_handles.end()) {
    cudnnHandle_t h = nullptr;
    if (cudnnStatus_t st = g_lib.cudnnCreate(&h); st != CUDNN_STATUS_SUCCESS) return st;
    it = g_handles.emplace(device, h).first;
  }
  *out = it->second;
  return CUDNN_STATUS_SUCCESS;
}

// The descriptors of one plan, destroyed with its state.
struct Descs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, param = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
  Descs() = default;
  Descs(const Descs&) = delete;
  Descs& operator=(const Descs&) = delete;
  ~Descs() {
    for (cudnnTensorDescriptor_t t : {x, y, param})
      if (t) g_lib.cudnnDestroyTensorDescriptor(t);
    if (w) g_lib.cudnnDestroyFilterDescriptor(w);
    if (conv) g_lib.cudnnDestroyConvolutionDescriptor(conv);
    if (pool) g_lib.cudnnDestroyPoolingDescriptor(pool);
  }
};

// Plan-time failure of `call`: UNIMPLEMENTED, so the own kernel may take it.
spora_plugin_error_t* refuse(const GpuPlan& gp, const std::string& call, cudnnStatus_t st) {
  return spora::plugin::unsupported(gp.desc, "cuDNN " + call + " failed: " + status_text(st));
}

#define SPORA_CUDNN_PLAN(call)                                          \
  do {                                                                  \
    if (cudnnStatus_t st_ = (call); st_ != CUDNN_STATUS_SUCCESS)        \
      return refuse(gp, #call, st_);                                    \
  } while (0)

cudnnDataType_t data_type(DataType t) { return static_cast<cudnnDataType_t>(static_cast<int>(t)); }

cudnnStatus_t make_tensor(cudnnTensorDescriptor_t* d, DataType t, const Dims4& dims) {
  if (cudnnStatus_t st = g_lib.cudnnCreateTensorDescriptor(d); st != CUDNN_STATUS_SUCCESS) {
    *d = nullptr;
    return st;
  }
  const Strides4 s = packed_strides(dims);
  return g_lib.cudnnSetTensor4dDescriptorEx(*d, data_type(t), dims.n, dims.c, dims.h, dims.w, s.n, s.c, s.h, s.w);
}

// alpha = 1 and beta in the type cuDNN reads them as: double for double
// data, float otherwise.
struct Scale {
  float f1 = 1, f0 = 0;
  double d1 = 1, d0 = 0;
  const void* one(bool dbl) const { return dbl ? static_cast<const void*>(&d1) : &f1; }
  const void* zero(bool dbl) const { return dbl ? static_cast<const void*>(&d0) : &f0; }
};
const Scale kScale;

const void* operand(const Slot& s, const void* const* in, void* const* out) {
  return s.output ? out[s.index] : in[s.index];
}

// ---- convolution ----

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
  cudnnStatus_t st;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    cudnnHandle_t h = nullptr;
    st = handle_locked(&h);
    if (st == CUDNN_STATUS_SUCCESS) st = g_lib.cudnnSetStream(h, stream);
    if (st == CUDNN_STATUS_SUCCESS) {
      const void* x = operand(a.xs, in, out);
      const void* w = operand(a.ws, in, out);
      const void* y = operand(a.ys, in, out);
      const size_t ws = s.algo.workspace;
      if (a.call == ConvCall::kForward)
        st = g_lib.cudnnConvolutionForward(h, kScale.one(dbl), s.d.x, x, s.d.w, w, s.d.conv,
                                           static_cast<cudnnConvolutionFwdAlgo_t>(s.algo.algo), workspace, ws, beta,
                                           s.d.y, const_cast<void*>(y));
      else if (a.call == ConvCall::kBackwardData)
        st = g_lib.cudnnConvolutionBackwardData(h, kScale.one(dbl), s.d.w, w, s.d.y, y, s.d.conv,
                                                static_cast<cudnnConvolutionBwdDataAlgo_t>(s.algo.algo), workspace, ws,
                                                beta, s.d.x, const_cast<void*>(x));
      else
        st = g_lib.cudnnConvolutionBackwardFilter(h, kScale.one(dbl), s.d.x, x, s.d.y, y, s.d.conv,
                                                  static_cast<cudnnConvolutionBwdFilterAlgo_t>(s.algo.algo), workspace,
                                                  ws, beta, s.d.w, const_cast<void*>(w));
    }
  }
  if (st != CUDNN_STATUS_SUCCESS) return launch_error(st);
  if (!s.use_ep) return cudaSuccess;
  return apply_epilogue(s.dtype, s.ep, out[a.ys.index], a.residual_input >= 0 ? in[a.residual_input] : nullptr,
                        a.y.numel(), stream);
}

spora_plugin_error_t* plan_conv(GpuPlan& gp, const TypeChoice& t) {
  auto s = std::make_shared<ConvState>();
  s->t = t;
  s->dtype = gp.desc.out[0].dtype;
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
  std::vector<int64_t> key = conv_signature(a, s->dtype);
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

// ---- support probes ----

// Whether cuDNN's legacy pooling / batch norm kernels run a configuration
// at all (a data type, a mode): they have no plan-time query, and a
// NOT_SUPPORTED at launch would fail the op instead of falling back. One
// tiny call on scratch memory on a private stream, once per device and
// key; a failure refuses the plan (the own kernel takes it). `why` says
// more than the status where the call ran but its numbers are not the
// reference's.
using ProbeFn = cudnnStatus_t (*)(cudnnHandle_t h, const TypeChoice& t, int mode, char* scratch, cudaStream_t stream,
                                  std::string* why);
constexpr size_t kProbeSlot = 4096, kProbeSlots = 12;

struct ProbeResult {
  cudnnStatus_t status;
  std::string why;
};
std::mutex g_probe_mu;
std::map<std::vector<int64_t>, ProbeResult> g_probes;

spora_plugin_error_t* probe_refusal(const GpuPlan& gp, const char* what, const ProbeResult& r) {
  if (r.status == CUDNN_STATUS_SUCCESS && r.why.empty()) return nullptr;
  if (!r.why.empty()) return spora::plugin::unsupported(gp.desc, std::string("cuDNN ") + what + ": " + r.why);
  return refuse(gp, std::string(what) + " (support probe)", r.status);
}

spora_plugin_error_t* probe(const GpuPlan& gp, const char* what, ProbeFn fn, const TypeChoice& t, int mode) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return spora::plugin::unsupported(gp.desc, "no current device");
  const std::vector<int64_t> key = {device, reinterpret_cast<int64_t>(fn), static_cast<int64_t>(t.data), mode};
  {
    std::lock_guard<std::mutex> lock(g_probe_mu);
    auto it = g_probes.find(key);
    if (it != g_probes.end()) return probe_refusal(gp, what, it->second);
  }
  ProbeResult r{CUDNN_STATUS_SUCCESS, ""};
  void* scratch = nullptr;
  cudaStream_t stream = nullptr;
  if (cudaMalloc(&scratch, kProbeSlot * kProbeSlots) != cudaSuccess ||
      cudaMemset(scratch, 0, kProbeSlot * kProbeSlots) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    r.status = CUDNN_STATUS_ALLOC_FAILED;
  } else {
    std::lock_guard<std::mutex> lock(g_mu);
    cudnnHandle_t h = nullptr;
    r.status = handle_locked(&h);
    if (r.status == CUDNN_STATUS_SUCCESS) r.status = g_lib.cudnnSetStream(h, stream);
    if (r.status == CUDNN_STATUS_SUCCESS) r.status = fn(h, t, mode, static_cast<char*>(scratch), stream, &r.why);
    if (r.status == CUDNN_STATUS_SUCCESS && cudaStreamSynchronize(stream) != cudaSuccess)
      r.status = CUDNN_STATUS_EXECUTION_FAILED;
  }
  if (stream) (void)cudaStreamDestroy(stream);
  if (scratch) (void)cudaFree(scratch);
  if (r.status == CUDNN_STATUS_ALLOC_FAILED)  // not an answer about support: ask again next time
    return probe_refusal(gp, what, r);
  {
    std::lock_guard<std::mutex> lock(g_probe_mu);
    g_probes[key] = r;
  }
  return probe_refusal(gp, what, r);
}

char* slot(char* scratch, int i) { return scratch + kProbeSlot * static_cast<size_t>(i); }

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

// ---- pooling ----

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
  cudnnStatus_t st;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    cudnnHandle_t h = nullptr;
    st = handle_locked(&h);
    if (st == CUDNN_STATUS_SUCCESS) st = g_lib.cudnnSetStream(h, stream);
    if (st == CUDNN_STATUS_SUCCESS) {
      if (!s.a.backward) {
        st = g_lib.cudnnPoolingForward(h, s.d.pool, kScale.one(dbl), s.d.x, in[s.a.xs.index], kScale.zero(dbl), s.d.y,
                                       out[s.a.ys.index]);
      } else {
        // Average pooling: y and x are not read for their values (dnn_args.h).
        const void* dy = in[s.a.ys.index];
        st = g_lib.cudnnPoolingBackward(h, s.d.pool, kScale.one(dbl), s.d.y, dy, s.d.y, dy, s.d.x, workspace,
                                        kScale.zero(dbl), s.d.x, out[s.a.xs.index]);
      }
    }
  }
  if (st != CUDNN_STATUS_SUCCESS) return launch_error(st);
  if (s.a.mode != PoolMode::kMax) return cudaSuccess;
  return max_pool_fixup(s.dtype, pool_fix_of(s.a), in[s.a.xs.index], out[s.a.ys.index], int64_t{s.a.x.n} * s.a.x.c,
                        stream);
}

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

// ---- batch norm ----

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
  cudnnStatus_t st;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    cudnnHandle_t h = nullptr;
    st = handle_locked(&h);
    if (st == CUDNN_STATUS_SUCCESS) st = g_lib.cudnnSetStream(h, stream);
    if (st == CUDNN_STATUS_SUCCESS) {
      const void* one = kScale.one(dbl);
      const void* zero = kScale.zero(dbl);
      if (a.backward) {
        void* dgamma = a.convert ? static_cast<void*>(fparam(a.off_dgamma)) : out[1];
        void* dbeta = a.convert ? static_cast<void*>(fparam(a.off_dbeta)) : out[2];
        // in: x, dy, gamma, mean, invstd (the saved statistics, compute dtype).
        st = g_lib.cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, one, zero, one, zero, s.d.x, in[0],
                                                   s.d.x, in[1], s.d.x, out[0], s.d.param,
                                                   param(a.off_gamma, in[2]), dgamma, dbeta, a.eps, in[3], in[4]);
      } else if (a.training) {
        void* rmean = a.convert ? static_cast<void*>(fparam(a.off_rmean)) : out[3];
        void* rvar = a.convert ? static_cast<void*>(fparam(a.off_rvar)) : out[4];
        st = g_lib.cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, one, zero, s.d.x, in[0], s.d.x,
                                                          out[0], s.d.param, param(a.off_gamma, in[1]),
                                                          param(a.off_beta, in[2]), a.momentum, rmean, rvar, a.eps,
                                                          out[1], out[2]);
      } else {
        st = g_lib.cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, one, zero, s.d.x, in[0], s.d.x,
                                                           out[0], s.d.param, param(a.off_gamma, in[1]),
                                                           param(a.off_beta, in[2]), param(a.off_rmean, in[3]),
                                                           param(a.off_rvar, in[4]), a.eps);
      }
    }
  }
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

#undef SPORA_CUDNN_PLAN

}  // namespace

std::string load() {
  const std::string name = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    g_why = e ? e : name + " not found";
    return g_why;
  }
  Lib lib;
  std::string missing;
#define SPORA_CUDNN_LOOKUP(f)                                 \
  lib.f = reinterpret_cast<decltype(&::f)>(dlsym(h, #f));    \
  if (!lib.f) missing += std::string(missing.empty() ? "" : ", ") + #f;
  SPORA_CUDNN_FUNCTIONS(SPORA_CUDNN_LOOKUP)
#undef SPORA_CUDNN_LOOKUP
  if (!missing.empty()) {
    dlclose(h);
    g_why = name + " lacks " + missing;
    return g_why;
  }
  const size_t version = lib.cudnnGetVersion();
  if (version / 10000 != CUDNN_MAJOR) {
    dlclose(h);
    g_why = name + " reports version " + std::to_string(version) + ", not " + std::to_string(CUDNN_MAJOR) + ".x";
    return g_why;
  }
  g_lib = lib;  // the library stays loaded for the process (plans' descriptors use it)
  g_loaded = true;
  g_why.clear();
  return "";
}

void unload() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [device, handle] : g_handles) {
    (void)cudaSetDevice(device);
    g_lib.cudnnDestroy(handle);
  }
  g_handles.clear();
}

bool available() { return g_loaded; }

const std::string& why_missing() { return g_why; }

spora_plugin_error_t* plan(GpuPlan& gp) {
  if (!g_loaded) return spora::plugin::unsupported(gp.desc, "cuDNN not found (" + g_why + ")");
  TypeChoice t;
  const int32_t dtype = gp.desc.in[0].dtype;
  if (!type_choice(dtype, &t))
    return spora::plugin::unsupported(gp.desc, std::string("cuDNN path has no ") + spora::plugin::dtype_name(dtype));
  const std::string& op = gp.desc.op;
  if (op.rfind("conv2d", 0) == 0) return plan_conv(gp, t);
  if (op.find("pool2d") != std::string::npos) return plan_pool(gp, t);
  if (op.rfind("batch_norm", 0) == 0) return plan_bn(gp, t);
  return spora::plugin::unsupported(gp.desc, "not a cuDNN op");
}

}  // namespace spora::gpu::dnn
