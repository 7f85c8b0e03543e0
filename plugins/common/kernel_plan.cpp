#include "kernel_plan.h"

#include <cstring>
#include <string>

#include "error.h"

namespace spora::plugin {
namespace {

struct OpName {
  const char* name;
  OpKind kind;
  int32_t inputs;
};

constexpr OpName kOps[] = {
    {"neg", OpKind::kNeg, 1},         {"exp", OpKind::kExp, 1},
    {"log", OpKind::kLog, 1},         {"tanh", OpKind::kTanh, 1},
    {"relu", OpKind::kRelu, 1},       {"sigmoid", OpKind::kSigmoid, 1},
    {"add", OpKind::kAdd, 2},         {"sub", OpKind::kSub, 2},
    {"mul", OpKind::kMul, 2},         {"div", OpKind::kDiv, 2},
    {"matmul", OpKind::kMatmul, 2},   {"sum", OpKind::kSum, 1},
    {"mean", OpKind::kMean, 1},       {"transpose", OpKind::kTranspose, 1},
    {"softmax", OpKind::kSoftmax, 1}, {"copy", OpKind::kCopy, 1},
};

const char* const kNames[] = {"neg", "exp",    "log", "tanh", "relu",      "sigmoid", "add",  "sub", "mul",
                              "div", "matmul", "sum", "mean", "transpose", "softmax", "copy", nullptr};

spora_plugin_error_t* invalid(const char* op, const std::string& why) {
  return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string("[") + op + "] " + why);
}

spora_plugin_error_t* to_shape(const char* op, const spora_tensor_desc_t& d, Shape* s) {
  if (d.rank < 0 || d.rank > SPORA_MAX_RANK) return invalid(op, "rank " + std::to_string(d.rank) + " out of range");
  if (d.rank > 0 && !d.dims) return invalid(op, "tensor descriptor without dims");
  if (d.strides) {
    return make_error(SPORA_PLUGIN_UNIMPLEMENTED, std::string("[") + op + "] strided tensors are not supported");
  }
  s->rank = d.rank;
  for (int i = 0; i < d.rank; ++i) {
    if (d.dims[i] < 0) return invalid(op, "negative dimension");
    s->dims[i] = d.dims[i];
  }
  return nullptr;
}

const spora_attr_t* find_attr(const spora_kernel_desc_t* d, const char* name) {
  for (size_t i = 0; i < d->num_attrs; ++i)
    if (d->attrs[i].name && std::strcmp(d->attrs[i].name, name) == 0) return &d->attrs[i];
  return nullptr;
}

bool bool_attr(const spora_kernel_desc_t* d, const char* name) {
  const spora_attr_t* a = find_attr(d, name);
  return a && (a->type == SPORA_ATTR_BOOL || a->type == SPORA_ATTR_INT) && a->i != 0;
}

bool broadcastable(const Shape& in, const Shape& out) {
  if (in.rank != out.rank) return false;
  for (int i = 0; i < in.rank; ++i)
    if (in.dims[i] != out.dims[i] && in.dims[i] != 1) return false;
  return true;
}

}  // namespace

const char* const* reference_op_names() { return kNames; }

size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case SPORA_DTYPE_F32: case SPORA_DTYPE_I32: return 4;
    case SPORA_DTYPE_F64: case SPORA_DTYPE_I64: return 8;
    case SPORA_DTYPE_F16: case SPORA_DTYPE_BF16: return 2;
    case SPORA_DTYPE_U8: case SPORA_DTYPE_BOOL: return 1;
    default: return 0;
  }
}

spora_plugin_error_t* plan_kernel(const spora_kernel_desc_t* desc, KernelPlan* out) {
  if (!desc || !desc->op || !out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[kernel] null descriptor");
  const char* op = desc->op;
  const OpName* entry = nullptr;
  for (const auto& o : kOps)
    if (std::strcmp(o.name, op) == 0) entry = &o;
  if (!entry) return make_error(SPORA_PLUGIN_UNIMPLEMENTED, std::string("[") + op + "] no kernel for this op");
  if (desc->num_inputs != static_cast<size_t>(entry->inputs) || desc->num_outputs != 1)
    return invalid(op, "expected " + std::to_string(entry->inputs) + " inputs and 1 output");
  KernelPlan p;
  p.kind = entry->kind;
  p.num_inputs = entry->inputs;
  p.dtype = desc->outputs[0].dtype;
  if (p.dtype != SPORA_DTYPE_F32 && p.dtype != SPORA_DTYPE_F64)
    return make_error(SPORA_PLUGIN_UNIMPLEMENTED,
                      std::string("[") + op + "] dtype " + std::to_string(p.dtype) + " has no kernel (f32, f64)");
  for (int i = 0; i < p.num_inputs; ++i) {
    if (desc->inputs[i].dtype != p.dtype) return invalid(op, "inputs and output differ in dtype");
    if (auto* e = to_shape(op, desc->inputs[i], &p.in[i])) return e;
  }
  if (auto* e = to_shape(op, desc->outputs[0], &p.out)) return e;

  switch (p.kind) {
    case OpKind::kNeg: case OpKind::kExp: case OpKind::kLog: case OpKind::kTanh:
    case OpKind::kRelu: case OpKind::kSigmoid: case OpKind::kCopy:
      if (p.in[0].numel() != p.out.numel()) return invalid(op, "input and output sizes differ");
      break;
    case OpKind::kAdd: case OpKind::kSub: case OpKind::kMul: case OpKind::kDiv:
      if (!broadcastable(p.in[0], p.out) || !broadcastable(p.in[1], p.out))
        return invalid(op, "inputs do not broadcast to the output (pad inputs to the output rank)");
      break;
    case OpKind::kMatmul: {
      p.transpose_a = bool_attr(desc, "transpose_a");
      p.transpose_b = bool_attr(desc, "transpose_b");
      const Shape &a = p.in[0], &b = p.in[1], &y = p.out;
      int r = y.rank;
      if (r < 2 || a.rank != r || b.rank != r) return invalid(op, "operands must have the output's rank (>= 2)");
      int64_t m = p.transpose_a ? a.dims[r - 1] : a.dims[r - 2];
      int64_t ka = p.transpose_a ? a.dims[r - 2] : a.dims[r - 1];
      int64_t kb = p.transpose_b ? b.dims[r - 1] : b.dims[r - 2];
      int64_t n = p.transpose_b ? b.dims[r - 2] : b.dims[r - 1];
      if (ka != kb || y.dims[r - 2] != m || y.dims[r - 1] != n) return invalid(op, "shapes do not contract");
      for (int i = 0; i < r - 2; ++i) {
        if ((a.dims[i] != y.dims[i] && a.dims[i] != 1) || (b.dims[i] != y.dims[i] && b.dims[i] != 1))
          return invalid(op, "batch dimensions do not broadcast");
      }
      break;
    }
    case OpKind::kSum: case OpKind::kMean: {
      const spora_attr_t* axes = find_attr(desc, "axes");
      if (p.in[0].rank != p.out.rank) return invalid(op, "output must keep reduced dims as 1");
      if (axes && axes->type == SPORA_ATTR_INTS && axes->count > 0) {
        for (size_t i = 0; i < axes->count; ++i) {
          int64_t ax = axes->ints[i];
          if (ax < 0 || ax >= p.in[0].rank) return invalid(op, "axis out of range");
          p.reduce_axis[ax] = true;
        }
      } else {
        for (int i = 0; i < p.in[0].rank; ++i) p.reduce_axis[i] = true;
      }
      for (int i = 0; i < p.in[0].rank; ++i) {
        int64_t want = p.reduce_axis[i] ? 1 : p.in[0].dims[i];
        if (p.out.dims[i] != want) return invalid(op, "output shape does not match the reduction");
      }
      break;
    }
    case OpKind::kTranspose: {
      const spora_attr_t* perm = find_attr(desc, "perm");
      int r = p.in[0].rank;
      if (!perm || perm->type != SPORA_ATTR_INTS || perm->count != static_cast<size_t>(r) || p.out.rank != r)
        return invalid(op, "perm must list every axis");
      bool seen[SPORA_MAX_RANK] = {};
      for (int i = 0; i < r; ++i) {
        int64_t ax = perm->ints[i];
        if (ax < 0 || ax >= r || seen[ax]) return invalid(op, "perm is not a permutation");
        seen[ax] = true;
        p.perm[i] = ax;
        if (p.out.dims[i] != p.in[0].dims[ax]) return invalid(op, "output shape does not match perm");
      }
      break;
    }
    case OpKind::kSoftmax: {
      const spora_attr_t* axis = find_attr(desc, "axis");
      int64_t ax = axis ? axis->i : p.in[0].rank - 1;
      if (p.in[0].rank == 0) ax = 0;
      else if (ax < 0 || ax >= p.in[0].rank) return invalid(op, "axis out of range");
      p.axis = static_cast<int32_t>(ax);
      if (p.in[0].numel() != p.out.numel()) return invalid(op, "input and output sizes differ");
      break;
    }
  }
  *out = p;
  return nullptr;
}

void run_reference(const KernelPlan& p, const void* const* in, void* const* out) {
  switch (p.kind) {
    case OpKind::kNeg: case OpKind::kExp: case OpKind::kLog: case OpKind::kTanh:
    case OpKind::kRelu: case OpKind::kSigmoid: case OpKind::kCopy:
      return ref_unary(p, in[0], out[0]);
    case OpKind::kAdd: case OpKind::kSub: case OpKind::kMul: case OpKind::kDiv:
      return ref_binary(p, in[0], in[1], out[0]);
    case OpKind::kMatmul: return ref_matmul(p, in[0], in[1], out[0]);
    case OpKind::kSum: case OpKind::kMean: return ref_reduce(p, in[0], out[0]);
    case OpKind::kTranspose: return ref_transpose(p, in[0], out[0]);
    case OpKind::kSoftmax: return ref_softmax(p, in[0], out[0]);
  }
}

}  // namespace spora::plugin
