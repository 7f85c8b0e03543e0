// cuDNN argument plumbing of the CUDA plugin, without cuDNN: from a
// KernelPlan the reference planner validated, which cuDNN call runs an op,
// which operand plays x / w / y (or dx / dy) of the forward convolution or
// pooling, the packed NCHW dims and strides, the geometry, the data, compute
// and math types per dtype, the algorithm policy and the workspace. Every
// case cuDNN cannot reproduce exactly (the reference kernels in
// plugins/common/kernels define the semantics) is refused with a reason, so
// gpu_dnn.cpp plans the plugin's own kernel instead. gpu_dnn.cpp turns these
// into descriptors (and static_asserts that the enum values below are
// cuDNN's); tests/gpu/gpu_math_dnn_test.cpp checks them without a GPU.
#pragma once
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernel_plan.h"
#include "math/hd.h"

namespace spora::gpu::dnn {

// cudnnDataType_t values.
enum class DataType : int { kFloat = 0, kDouble = 1, kHalf = 2, kBfloat16 = 9 };
// cudnnMathType_t values.
enum class MathType : int { kDefault = 0, kTensorOp = 1, kTensorOpAllowConversion = 2, kFma = 3 };
// cudnnPoolingMode_t values (MAX_DETERMINISTIC: the same result run to run).
enum class PoolMode : int { kMax = 3, kAvgIncludePad = 1, kAvgExcludePad = 2 };

// The types a dtype runs with. f32 must not use TF32 tensor cores (the
// certification compares with cpu's f32): FMA math only, unless the user
// allowed TF32 for convolutions (conv_type_choice). f16/bf16 compute in
// float on tensor cores; their batch-norm parameters are float (cuDNN's
// rule for half data), so the plugin converts them.
struct TypeChoice {
  DataType data, compute, bn_param;
  MathType math;
  bool fma_only;  // refuse algorithms that would use another math type
  size_t elem_size, bn_param_size;
  // f32 with TF32 allowed: refuse algorithms that convert the data down to
  // f16 (TENSOR_OP_MATH_ALLOW_CONVERSION), which is less than TF32 allows.
  bool tf32 = false;
};

inline bool type_choice(int32_t dtype, TypeChoice* t) {
  switch (dtype) {
    case SPORA_DTYPE_F32: *t = {DataType::kFloat, DataType::kFloat, DataType::kFloat, MathType::kFma, true, 4, 4}; return true;
    case SPORA_DTYPE_F64:
      *t = {DataType::kDouble, DataType::kDouble, DataType::kDouble, MathType::kFma, true, 8, 8};
      return true;
    case SPORA_DTYPE_F16: *t = {DataType::kHalf, DataType::kFloat, DataType::kFloat, MathType::kTensorOp, false, 2, 4}; return true;
    case SPORA_DTYPE_BF16:
      *t = {DataType::kBfloat16, DataType::kFloat, DataType::kFloat, MathType::kTensorOp, false, 2, 4};
      return true;
    default: return false;
  }
}

// Convolution precision (the kernel attribute "conv_precision", which the
// core adds only when it is not "highest"): highest = f32 in exact FP32
// (FMA math); high = f32 may use TF32 tensor cores. Other dtypes ignore it.
enum class ConvPrecision : int32_t { kHighest, kHigh };

inline bool conv_precision_of(const std::string& s, ConvPrecision* out) {
  if (s == "highest") *out = ConvPrecision::kHighest;
  else if (s == "high") *out = ConvPrecision::kHigh;
  else return false;
  return true;
}

// The types a convolution runs with: type_choice's, except f32 under
// "high", which takes CUDNN_DEFAULT_MATH (the math type cuDNN documents as
// permitting TF32 tensor cores on Ampere and later for float data, and
// PyTorch's choice when allow_tf32 is set) and the algorithms cuDNN reports
// with it.
inline TypeChoice conv_type_choice(const TypeChoice& dtype_types, int32_t dtype, ConvPrecision prec) {
  TypeChoice t = dtype_types;
  if (dtype == SPORA_DTYPE_F32 && prec == ConvPrecision::kHigh) {
    t.math = MathType::kDefault;
    t.fma_only = false;
    t.tf32 = true;
  }
  return t;
}

// A packed NCHW tensor as cuDNN's 4-D descriptors take it (int sizes).
struct Dims4 {
  int n = 0, c = 0, h = 0, w = 0;
  int64_t numel() const { return int64_t{n} * c * h * w; }
};
struct Strides4 {
  int n, c, h, w;
};
inline Strides4 packed_strides(const Dims4& d) { return {d.c * d.h * d.w, d.h * d.w, d.w, 1}; }

// cuDNN's legacy descriptors hold int sizes and index with int: every
// dimension >= 1 and every tensor below 2^31 elements.
inline bool dims4_of(const spora::plugin::Shape& s, Dims4* d) {
  if (s.rank != 4) return false;
  int64_t numel = 1;
  for (int i = 0; i < 4; ++i) {
    if (s.dims[i] < 1 || s.dims[i] > INT_MAX) return false;
    numel *= s.dims[i];
    if (numel > INT_MAX) return false;
  }
  *d = {static_cast<int>(s.dims[0]), static_cast<int>(s.dims[1]), static_cast<int>(s.dims[2]),
        static_cast<int>(s.dims[3])};
  return true;
}

// Where a role's tensor is in the kernel's operands.
struct Slot {
  bool output = false;
  int index = -1;
};

// ---- convolution ----

enum class ConvCall { kForward, kBackwardData, kBackwardFilter };

struct ConvArgs {
  ConvCall call = ConvCall::kForward;
  // The forward convolution's x [N,C,H,W], w [O,C/g,kH,kW], y [N,O,OH,OW],
  // whatever the op computes from them.
  Dims4 x, w, y;
  Slot xs, ws, ys;
  int pad[2] = {0, 0}, stride[2] = {1, 1}, dil[2] = {1, 1}, groups = 1;
  // conv2d_bias / _act / _add_act: y starts as the bias (the convolution
  // adds to it, beta = 1, so conv + bias rounds once as the reference's);
  // the epilogue kernel then adds the residual and applies the activation.
  int bias_input = -1, residual_input = -1;
  std::string activation = "none";
  bool epilogue() const { return residual_input >= 0 || activation != "none"; }
};

// The output size of the forward convolution along one axis with the
// leading pad on both sides (cuDNN pads symmetrically); -1 if negative span.
inline int64_t conv_out_size(int64_t in, int64_t pad, int64_t k, int64_t dil, int64_t stride) {
  const int64_t span = in + 2 * pad - dil * (k - 1) - 1;
  return span < 0 ? -1 : span / stride + 1;
}

// "" and *a filled, or why cuDNN cannot compute this op exactly.
// Attributes as plugins/common/kernels/conv.cpp reads them: stride (2),
// dilation (2), padding (4: top, bottom, left, right), groups; conv2d_act /
// conv2d_add_act also activation (plugins/common/kernels/epilogue.cpp).
inline std::string conv_args_of(const spora::plugin::KernelPlan& p, ConvArgs* a) {
  const std::string& op = p.op;
  if (op == "conv2d" || op == "conv2d_bias" || op == "conv2d_act" || op == "conv2d_add_act") {
    a->call = ConvCall::kForward;
    a->xs = {false, 0};
    a->ws = {false, 1};
    a->ys = {true, 0};
    if (op != "conv2d") a->bias_input = 2;
    if (op == "conv2d_add_act") a->residual_input = 3;
    if (op == "conv2d_act" || op == "conv2d_add_act") a->activation = p.attrs.get_string("activation", "none");
  } else if (op == "conv2d_grad_input" || op == "conv2d_transpose") {
    // (dy, w) -> dx: the adjoint of the forward convolution in x.
    a->call = ConvCall::kBackwardData;
    a->ys = {false, 0};
    a->ws = {false, 1};
    a->xs = {true, 0};
  } else if (op == "conv2d_grad_weight") {
    // (x, dy) -> dw.
    a->call = ConvCall::kBackwardFilter;
    a->xs = {false, 0};
    a->ys = {false, 1};
    a->ws = {true, 0};
  } else {
    return "not a convolution";
  }
  const auto shape = [&](const Slot& s) -> const spora::plugin::Shape& {
    return s.output ? p.out[s.index].shape : p.in[s.index].shape;
  };
  if (!dims4_of(shape(a->xs), &a->x) || !dims4_of(shape(a->ws), &a->w) || !dims4_of(shape(a->ys), &a->y))
    return "an empty operand or one of 2^31 elements or more";
  const auto s = p.attrs.get_ints("stride"), d = p.attrs.get_ints("dilation"), pad = p.attrs.get_ints("padding");
  const int64_t groups = p.attrs.get_int("groups", 1);
  if (s.size() != 2 || d.size() != 2 || pad.size() != 4) return "attributes are not canonical";
  if (groups < 1 || groups > INT_MAX) return "groups out of int range";
  a->groups = static_cast<int>(groups);
  const int64_t in[2] = {a->x.h, a->x.w}, out[2] = {a->y.h, a->y.w}, k[2] = {a->w.h, a->w.w};
  for (int i = 0; i < 2; ++i) {
    if (s[i] > INT_MAX || d[i] > INT_MAX || pad[2 * i] > INT_MAX) return "stride, dilation or padding out of int range";
    // With the leading pad on both sides the taps of every output position
    // are the reference's: only the trailing pad decides how many outputs
    // there are, so the case is exact iff that count is the same.
    if (conv_out_size(in[i], pad[2 * i], k[i], d[i], s[i]) != out[i])
      return "padding (" + std::to_string(pad[2 * i]) + ", " + std::to_string(pad[2 * i + 1]) +
             ") is asymmetric in a way cuDNN's symmetric padding cannot express";
    a->pad[i] = static_cast<int>(pad[2 * i]);
    a->stride[i] = static_cast<int>(s[i]);
    a->dil[i] = static_cast<int>(d[i]);
  }
  if (a->activation != "none" && a->activation != "relu" && a->activation != "sigmoid" && a->activation != "tanh" &&
      a->activation != "gelu" && a->activation != "gelu_tanh")
    return "unknown activation \"" + a->activation + "\"";
  return "";
}

// The algorithm cache's key: every value the descriptors and the call
// depend on (the device is added by the caller). A TF32 choice gets one
// more entry, so it never serves an exact-FP32 plan nor the reverse; the
// default keys are unchanged.
inline std::vector<int64_t> conv_signature(const ConvArgs& a, int32_t dtype, const TypeChoice& t) {
  std::vector<int64_t> key = {static_cast<int64_t>(a.call), dtype, a.x.n, a.x.c, a.x.h, a.x.w, a.w.n,
                              a.w.c, a.w.h, a.w.w, a.y.n, a.y.c, a.y.h, a.y.w, a.pad[0], a.pad[1],
                              a.stride[0], a.stride[1], a.dil[0], a.dil[1], a.groups};
  if (t.tf32) key.push_back(1);
  return key;
}

// ---- algorithm choice ----

// One entry of cudnnGet*Algorithm_v7's results (cuDNN's perf structs
// reduced to what the policy reads), in cuDNN's order: fastest first.
struct AlgoPerf {
  int algo;
  int status;  // 0: CUDNN_STATUS_SUCCESS
  size_t memory;
  MathType math;
};
struct AlgoChoice {
  int algo = -1;
  MathType math = MathType::kDefault;
  size_t workspace = 0;
};

// Workspace an algorithm may take (the executor allocates it per launch).
constexpr size_t kWorkspaceCap = size_t{512} << 20;

// The first (heuristically fastest) algorithm that succeeded, fits the cap
// and, for f32/f64, uses FMA math; it then runs with FMA math set on the
// descriptor (never TF32). f16/bf16, and f32 with TF32 allowed, run with
// the math type cuDNN reported (f32: never one converting down to f16).
inline bool choose_algo(const std::vector<AlgoPerf>& perfs, const TypeChoice& t, size_t cap, AlgoChoice* out) {
  for (const AlgoPerf& r : perfs) {
    if (r.status != 0 || r.memory > cap) continue;
    if (t.fma_only && r.math != MathType::kFma && r.math != MathType::kDefault) continue;
    if (t.tf32 && r.math == MathType::kTensorOpAllowConversion) continue;
    out->algo = r.algo;
    out->math = t.fma_only ? MathType::kFma : r.math;
    out->workspace = r.memory;
    return true;
  }
  return false;
}

// ---- pooling ----

struct PoolArgs {
  bool backward = false;
  PoolMode mode = PoolMode::kMax;
  Dims4 x, y;  // the forward pooling's input and output
  Slot xs, ys;  // forward: x, y; backward: dy in ys, dx in xs
  int window[2] = {1, 1}, pad[2] = {0, 0}, stride[2] = {1, 1};
};

// "" and *a filled, or why cuDNN cannot pool this exactly. Attributes as
// plugins/common/kernels/pool.cpp reads them: kernel_size (2), stride (2),
// dilation (2, optional), padding (4), count_include_pad (avg).
inline std::string pool_args_of(const spora::plugin::KernelPlan& p, PoolArgs* a) {
  const std::string& op = p.op;
  const bool adaptive = op == "adaptive_avg_pool2d" || op == "adaptive_avg_pool2d_grad";
  if (op == "max_pool2d") {
    a->mode = PoolMode::kMax;
  } else if (op == "avg_pool2d" || op == "avg_pool2d_grad") {
    a->mode = p.attrs.get_bool("count_include_pad", true) ? PoolMode::kAvgIncludePad : PoolMode::kAvgExcludePad;
  } else if (adaptive) {
    a->mode = PoolMode::kAvgIncludePad;  // no padding: the divisor is the window
  } else if (op == "max_pool2d_grad") {
    // The reference routes each gradient to the window's first maximum
    // (first NaN); cuDNN's backward takes the forward output and documents
    // no tie rule, and ties are common (ReLU zeros, f16): the own kernel.
    return "max_pool2d_grad's first-maximum tie rule is not cuDNN's";
  } else {
    return "not a pooling";
  }
  a->backward = op.size() > 5 && op.compare(op.size() - 5, 5, "_grad") == 0;
  if (a->backward) {
    a->ys = {false, 0};
    a->xs = {true, 0};
  } else {
    a->xs = {false, 0};
    a->ys = {true, 0};
  }
  const auto shape = [&](const Slot& s) -> const spora::plugin::Shape& {
    return s.output ? p.out[s.index].shape : p.in[s.index].shape;
  };
  if (!dims4_of(shape(a->xs), &a->x) || !dims4_of(shape(a->ys), &a->y))
    return "an empty operand or one of 2^31 elements or more";
  const int64_t in[2] = {a->x.h, a->x.w}, out[2] = {a->y.h, a->y.w};
  if (adaptive) {
    // Bins [floor(i*H/OH), ceil((i+1)*H/OH)) are one fixed window only when
    // OH divides H; other sizes overlap unevenly (own kernel).
    for (int i = 0; i < 2; ++i) {
      if (in[i] % out[i] != 0) return "adaptive bins are uneven (output does not divide input)";
      a->window[i] = a->stride[i] = static_cast<int>(in[i] / out[i]);
      a->pad[i] = 0;
    }
    return "";
  }
  const auto k = p.attrs.get_ints("kernel_size"), s = p.attrs.get_ints("stride"), pad = p.attrs.get_ints("padding");
  auto d = p.attrs.get_ints("dilation");
  if (d.empty()) d = {1, 1};
  if (k.size() != 2 || s.size() != 2 || d.size() != 2 || pad.size() != 4) return "attributes are not canonical";
  for (int i = 0; i < 2; ++i) {
    // avg ignores dilation in the reference; max uses it, cuDNN has none.
    if (a->mode == PoolMode::kMax && d[i] != 1) return "dilated max pooling";
    if (k[i] > INT_MAX || s[i] > INT_MAX) return "window or stride out of int range";
    if (pad[2 * i] != pad[2 * i + 1]) return "asymmetric padding";
    // Every window then overlaps the input (no all-padding window, whose
    // max the reference defines as -inf) and lies inside the padded input
    // (the include-pad divisor is the full window, as cuDNN's).
    if (pad[2 * i] >= k[i]) return "padding not smaller than the window";
    const int64_t span = in[i] + 2 * pad[2 * i] - k[i];
    if (span < 0 || span / s[i] + 1 != out[i]) return "output size is not the floor-mode size (ceil mode)";
    a->window[i] = static_cast<int>(k[i]);
    a->stride[i] = static_cast<int>(s[i]);
    a->pad[i] = static_cast<int>(pad[2 * i]);
  }
  return "";
}

// cudnnPoolingBackward reads y and x: average pooling does not use their
// values, so y is given dy (same shape) and x a workspace of x's size
// rather than aliasing the output dx.
inline size_t pool_workspace(const PoolArgs& a, const TypeChoice& t) {
  return a.backward ? static_cast<size_t>(a.x.numel()) * t.elem_size : 0;
}

// cuDNN's max pooling starts each window from the lowest finite value of
// the type, so a window whose taps are all -inf yields that value where the
// reference gives -inf. The repair after the call is exact: an output equal
// to the lowest finite value stays only if one of its taps equals it (else
// every tap was below it, i.e. -inf). Run by kernels/dnn_epilogue.cu.
struct PoolFix {
  int64_t h = 0, w = 0, oh = 0, ow = 0;
  int window[2] = {1, 1}, pad[2] = {0, 0}, stride[2] = {1, 1};
};

inline PoolFix pool_fix_of(const PoolArgs& a) {
  PoolFix f;
  f.h = a.x.h;
  f.w = a.x.w;
  f.oh = a.y.h;
  f.ow = a.y.w;
  for (int i = 0; i < 2; ++i) {
    f.window[i] = a.window[i];
    f.pad[i] = a.pad[i];
    f.stride[i] = a.stride[i];
  }
  return f;
}

template <class T>
SPORA_HD inline compute_of<T> lowest_finite();
template <>
SPORA_HD inline float lowest_finite<float>() {
  return std::numeric_limits<float>::lowest();
}
template <>
SPORA_HD inline double lowest_finite<double>() {
  return std::numeric_limits<double>::lowest();
}
template <>
SPORA_HD inline float lowest_finite<half_t>() {
  return -65504.0f;
}
template <>
SPORA_HD inline float lowest_finite<bhalf_t>() {
  return bhalf_to_float(0xff7fu);
}

// Output (r, q) of one plane: y as cuDNN wrote it -> the reference's value.
template <class T>
SPORA_HD inline T max_pool_fix(const PoolFix& g, const T* x, int64_t r, int64_t q, T y) {
  using C = compute_of<T>;
  const C v = elem<T>::load(y);
  if (!(v == lowest_finite<T>())) return y;
  for (int i = 0; i < g.window[0]; ++i) {
    const int64_t ih = r * g.stride[0] - g.pad[0] + i;
    if (ih < 0 || ih >= g.h) continue;
    for (int j = 0; j < g.window[1]; ++j) {
      const int64_t iw = q * g.stride[1] - g.pad[1] + j;
      if (iw >= 0 && iw < g.w && elem<T>::load(x[ih * g.w + iw]) == v) return y;
    }
  }
  return elem<T>::store(static_cast<C>(-INFINITY));
}

// ---- batch norm ----

// batch_norm (x, gamma, beta, running_mean, running_var) -> (y, mean,
// invstd, new running_mean, new running_var) and batch_norm_grad (x, dy,
// gamma, mean, invstd) -> (dx, dgamma, dbeta), x flattened to [N, C, S]
// (plugins/common/kernels/norm.cpp). cuDNN's spatial mode over [N, C, S, 1]:
// training saves the batch mean and 1/sqrt(var + eps) and updates the
// running stats with factor = momentum and the unbiased variance, as the
// reference; inference normalises with the running stats.
struct BnArgs {
  bool backward = false, training = false;
  Dims4 x;  // [N, C, S, 1]
  double eps = 1e-5, momentum = 0.1;
  // f16/bf16: float copies of the T parameters in the workspace at these
  // byte offsets (-1: unused); f32/f64 use the operands directly.
  bool convert = false;
  int64_t off_gamma = -1, off_beta = -1, off_rmean = -1, off_rvar = -1, off_dgamma = -1, off_dbeta = -1;
  size_t workspace = 0;
};

constexpr size_t kWorkspaceAlign = 256;
inline size_t align_up(size_t v) { return (v + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign; }

inline std::string bn_args_of(const spora::plugin::KernelPlan& p, const TypeChoice& t, BnArgs* a) {
  if (p.op != "batch_norm" && p.op != "batch_norm_grad") return "not a batch norm";
  a->backward = p.op == "batch_norm_grad";
  a->training = p.attrs.get_bool("training", false);
  a->eps = p.attrs.get_float("eps", 1e-5);
  a->momentum = p.attrs.get_float("momentum", 0.1);
  const spora::plugin::Shape& x = p.in[0].shape;
  if (x.rank != 3) return "input is not [N, C, S]";
  spora::plugin::Shape x4;
  x4.rank = 4;
  x4.dims[0] = x.dims[0];
  x4.dims[1] = x.dims[1];
  x4.dims[2] = x.dims[2];
  x4.dims[3] = 1;
  if (!dims4_of(x4, &a->x)) return "an empty input or one of 2^31 elements or more";
  if (!(a->eps >= 0)) return "negative epsilon";  // cuDNN's minimum (CUDNN_BN_MIN_EPSILON) is 0
  // m = 1: the reference's unbiased variance is the biased one (0); cuDNN
  // would divide by m - 1.
  if (!a->backward && a->training && int64_t{a->x.n} * a->x.h < 2) return "training batch norm over one value";
  a->convert = t.bn_param != t.data;
  if (a->convert) {
    const size_t bytes = align_up(static_cast<size_t>(a->x.c) * t.bn_param_size);
    size_t off = 0;
    const auto take = [&](int64_t* o) {
      *o = static_cast<int64_t>(off);
      off += bytes;
    };
    take(&a->off_gamma);
    if (a->backward) {
      take(&a->off_dgamma);
      take(&a->off_dbeta);
    } else {
      take(&a->off_beta);
      take(&a->off_rmean);
      take(&a->off_rvar);
    }
    a->workspace = off;
  }
  return "";
}

}  // namespace spora::gpu::dnn
