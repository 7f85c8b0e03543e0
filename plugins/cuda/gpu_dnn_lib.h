// The cuDNN path's internals, shared by gpu_dnn.cpp (loader, handles,
// support probes, dispatch) and the family files gpu_dnn_conv.cpp,
// gpu_dnn_pool.cpp, gpu_dnn_norm.cpp. Not part of the plugin's interface
// (gpu_dnn.h is). The cuDNN headers give the types, the function types
// (decltype) and the version only: every entry point is looked up with
// dlsym into g_lib.
#pragma once
#include <cudnn.h>

#include <mutex>
#include <string>

#include "gpu_dnn.h"
#include "kernel_plan.h"
#include "math/dnn_args.h"

namespace spora::gpu::dnn::detail {

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

extern Lib g_lib;  // written once by load() (host thread, initialize) before any kernel is planned
// Guards the per-device handles: a handle's stream binding and call must
// not interleave with another thread's, so every call holds it.
extern std::mutex g_mu;

std::string status_text(cudnnStatus_t st);
// A launch's failed status as the executor's error.
cudaError_t launch_error(cudnnStatus_t st);
// The current device's handle, made on first use; g_mu must be held.
cudnnStatus_t handle_locked(cudnnHandle_t* out);

// call(h) with the current device's handle bound to `stream`, under g_mu:
// every cuDNN call that enqueues work goes through here.
template <class F>
cudnnStatus_t on_stream(cudaStream_t stream, F&& call) {
  std::lock_guard<std::mutex> lock(g_mu);
  cudnnHandle_t h = nullptr;
  cudnnStatus_t st = handle_locked(&h);
  if (st == CUDNN_STATUS_SUCCESS) st = g_lib.cudnnSetStream(h, stream);
  return st == CUDNN_STATUS_SUCCESS ? call(h) : st;
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
spora_plugin_error_t* refuse(const GpuPlan& gp, const std::string& call, cudnnStatus_t st);

// In a plan function (GpuPlan& gp in scope): a failed call refuses the plan.
#define SPORA_CUDNN_PLAN(call)                                   \
  do {                                                           \
    if (cudnnStatus_t st_ = (call); st_ != CUDNN_STATUS_SUCCESS) \
      return ::spora::gpu::dnn::detail::refuse(gp, #call, st_);  \
  } while (0)

inline cudnnDataType_t data_type(DataType t) { return static_cast<cudnnDataType_t>(static_cast<int>(t)); }

// A packed NCHW tensor descriptor.
cudnnStatus_t make_tensor(cudnnTensorDescriptor_t* d, DataType t, const Dims4& dims);

// alpha = 1 and beta in the type cuDNN reads them as: double for double
// data, float otherwise.
struct Scale {
  float f1 = 1, f0 = 0;
  double d1 = 1, d0 = 0;
  const void* one(bool dbl) const { return dbl ? static_cast<const void*>(&d1) : &f1; }
  const void* zero(bool dbl) const { return dbl ? static_cast<const void*>(&d0) : &f0; }
};
extern const Scale kScale;

inline const void* operand(const Slot& s, const void* const* in, void* const* out) {
  return s.output ? out[s.index] : in[s.index];
}

// ---- support probes (gpu_dnn.cpp) ----

// Whether cuDNN's legacy pooling / batch norm kernels run a configuration
// at all (a data type, a mode): they have no plan-time query, and a
// NOT_SUPPORTED at launch would fail the op instead of falling back. One
// tiny call on scratch memory (kProbeSlots slots of kProbeSlot bytes, zeroed)
// on a private stream, once per device, probe and key; a failure refuses
// the plan (the own kernel takes it). `why` says more than the status where
// the call ran but its numbers are not the reference's.
using ProbeFn = cudnnStatus_t (*)(cudnnHandle_t h, const TypeChoice& t, int mode, char* scratch, cudaStream_t stream,
                                  std::string* why);
constexpr size_t kProbeSlot = 4096, kProbeSlots = 12;
spora_plugin_error_t* probe(const GpuPlan& gp, const char* what, ProbeFn fn, const TypeChoice& t, int mode);
inline char* slot(char* scratch, int i) { return scratch + kProbeSlot * static_cast<size_t>(i); }

// ---- the families ----
spora_plugin_error_t* plan_conv(GpuPlan& gp, const TypeChoice& t);  // gpu_dnn_conv.cpp
spora_plugin_error_t* plan_pool(GpuPlan& gp, const TypeChoice& t);  // gpu_dnn_pool.cpp
spora_plugin_error_t* plan_bn(GpuPlan& gp, const TypeChoice& t);    // gpu_dnn_norm.cpp

}  // namespace spora::gpu::dnn::detail
