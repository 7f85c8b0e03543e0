// Creation ops: zeros, ones, full, arange, eye. They take no inputs; the
// caller passes the device to run on (spora_op_call's `device`).
//
// Contract between inference and kernels (plugins/common/kernels/creation.cpp):
// - The output dtype comes from the "dtype" attribute (a name as
//   spora_dtype_name returns it: "f32", ..., "bool"); inference puts it in
//   call.out[0].dtype and kernels read it from there, not from the string.
// - zeros, ones, full: the output shape is the "shape" attribute. full's
//   "value" (a double) is checked by inference to be exact for integer
//   dtypes (integral and in range); bool stores value != 0; float dtypes
//   round to nearest (overflow gives inf, as numpy does).
// - arange: the output is 1-D of length max(0, ceil((stop - start) / step)),
//   numpy's rule. Element i is start + i * step, evaluated in double and
//   rounded once for float dtypes, exactly in int64 for integer dtypes (for
//   which inference checked that start and step are integers and that every
//   element fits the dtype). bool has no arange.
// - eye: "m" is normalised (never -1 when a kernel sees it); the output is
//   (n, m) with ones at (i, i).
// None has a differentiable input (rules::kNoGradient).
#include <cmath>
#include <limits>
#include <string>

#include "ir/op.h"
#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora {

// Helpers shared with random.cpp (the same op family).

// The dtype named by the "dtype" attribute; with floats_only, one of the
// four float dtypes.
DType creation_dtype(const OpDef& op, const Attrs& attrs, bool floats_only) {
  const AttrValue* a = attrs.find("dtype");
  const std::string name = a ? a->s : std::string("f32");
  for (int32_t t = SPORA_DTYPE_F32; t <= SPORA_DTYPE_BOOL; ++t) {
    const DType d = static_cast<DType>(t);
    if (name != dtype_name(d)) continue;
    if (floats_only && !dtype_is_float(d))
      fail(Code::kInvalidArgument, "[{}] dtype {} is not supported (supported: f32, f64, f16, bf16)", op.name, name);
    return d;
  }
  fail(Code::kInvalidArgument, "[{}] unknown dtype \"{}\" (one of: f32, f64, f16, bf16, i32, i64, u8, bool)", op.name,
       name);
}

// The shape of `dims`, checked like a tensor's (rank, non-negative dims, an
// element count that fits) and small enough that its bytes fit in int64.
Shape creation_shape(const OpDef& op, const std::vector<int64_t>& dims, DType dt) {
  if (dims.size() > static_cast<size_t>(kMaxRank))
    fail(Code::kInvalidArgument, "[{}] shape has rank {}; at most {} is supported", op.name, dims.size(), kMaxRank);
  const Shape s = Shape::from(dims.data(), static_cast<int32_t>(dims.size()), op.name.c_str());
  if (s.numel() > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(dtype_size(dt)))
    fail(Code::kInvalidArgument, "[{}] shape {} of {} needs more bytes than fit in int64", op.name, s.str(),
         dtype_name(dt));
  return s;
}

namespace {

// [lo, hi] of an integer dtype, as doubles (exact: both are integers that
// doubles represent; i64's hi is checked as < 2^63 instead).
bool int_range(DType dt, double* lo, double* hi) {
  switch (dt) {
    case SPORA_DTYPE_I32: *lo = -2147483648.0; *hi = 2147483647.0; return true;
    case SPORA_DTYPE_I64: *lo = -9223372036854775808.0; *hi = 9223372036854775808.0; return true;
    case SPORA_DTYPE_U8: *lo = 0; *hi = 255; return true;
    default: return false;
  }
}

bool fits_int(DType dt, double v) {
  double lo, hi;
  if (!int_range(dt, &lo, &hi)) return true;
  return v >= lo && (dt == SPORA_DTYPE_I64 ? v < hi : v <= hi);
}

// A value an integer dtype holds exactly: finite, integral, in range.
void check_int_value(const OpDef& op, const char* what, double v, DType dt) {
  double lo, hi;
  if (!int_range(dt, &lo, &hi)) return;
  if (!std::isfinite(v) || v != std::trunc(v))
    fail(Code::kInvalidArgument, "[{}] {} {} is not an integer, which dtype {} needs", op.name, what, v,
         dtype_name(dt));
  if (!fits_int(dt, v))
    fail(Code::kInvalidArgument, "[{}] {} {} is out of range for dtype {}", op.name, what, v, dtype_name(dt));
}

void set_output(OpCall& call, DType dt, const Shape& s) {
  call.out[0] = {dt, s};
  call.result[0] = s;
}

void infer_fill(const OpDef& op, const TensorMeta*, OpCall& call) {
  const DType dt = creation_dtype(op, call.attrs, false);
  const Shape s = creation_shape(op, call.attrs.get_ints("shape"), dt);
  if (op.name == "full") check_int_value(op, "value", call.attrs.get_float("value"), dt);
  set_output(call, dt, s);
}

void infer_arange(const OpDef& op, const TensorMeta*, OpCall& call) {
  const DType dt = creation_dtype(op, call.attrs, false);
  if (dt == SPORA_DTYPE_BOOL) fail(Code::kInvalidArgument, "[arange] dtype bool is not supported");
  const double start = call.attrs.get_float("start"), stop = call.attrs.get_float("stop"),
               step = call.attrs.get_float("step");
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    fail(Code::kInvalidArgument, "[arange] start, stop and step must be finite, got {}, {}, {}", start, stop, step);
  if (step == 0) fail(Code::kInvalidArgument, "[arange] step must be non-zero");
  const double len = std::ceil((stop - start) / step);
  // 2^53: beyond it element indices stop being exact doubles (and no
  // machine holds that many elements anyway).
  if (!(len <= 9007199254740992.0))
    fail(Code::kInvalidArgument, "[arange] ({} - {}) / {} gives {} elements; at most 2^53 are supported", stop, start,
         step, len);
  const int64_t n = len > 0 ? static_cast<int64_t>(len) : 0;
  double lo, hi;
  if (int_range(dt, &lo, &hi)) {
    check_int_value(op, "start", start, dt);
    // The step only needs to be an integer (it may be negative for u8).
    if (step != std::trunc(step) || !fits_int(SPORA_DTYPE_I64, step))
      fail(Code::kInvalidArgument, "[arange] step {} is not an int64 integer, which dtype {} needs", step,
           dtype_name(dt));
  }
  if (n > 0 && int_range(dt, &lo, &hi)) {
    // start and step are exact int64 here; the last element must fit too.
    int64_t last;
    if (__builtin_mul_overflow(n - 1, static_cast<int64_t>(step), &last) ||
        __builtin_add_overflow(last, static_cast<int64_t>(start), &last) || !fits_int(dt, static_cast<double>(last)))
      fail(Code::kInvalidArgument, "[arange] the last element, {} + {} * {}, is out of range for dtype {}", start,
           n - 1, step, dtype_name(dt));
  }
  const int64_t dims[1] = {n};
  set_output(call, dt, creation_shape(op, std::vector<int64_t>(dims, dims + 1), dt));
}

void infer_eye(const OpDef& op, const TensorMeta*, OpCall& call) {
  const DType dt = creation_dtype(op, call.attrs, false);
  const int64_t n = call.attrs.get_int("n");
  int64_t m = call.attrs.get_int("m");
  if (n < 0) fail(Code::kInvalidArgument, "[eye] n must be non-negative, got {}", n);
  if (m < -1) fail(Code::kInvalidArgument, "[eye] m must be non-negative (or -1 for m = n), got {}", m);
  if (m == -1) m = n;
  call.attrs.set("m", AttrValue::of_int(m));
  set_output(call, dt, creation_shape(op, {n, m}, dt));
}

AttrSpec dtype_attr() { return {"dtype", AttrType::kString, false, AttrValue::of_string("f32")}; }
AttrSpec shape_attr() { return {"shape", AttrType::kInts, true, {}}; }

}  // namespace

void register_creation_ops(OpRegistry& r) {
  OpDef zeros{"zeros", {}, {"y"}, {shape_attr(), dtype_attr()}, {}, infer_fill, "a tensor of zeros"};
  rules::kNoGradient.apply(zeros);
  r.add(std::move(zeros));
  OpDef ones{"ones", {}, {"y"}, {shape_attr(), dtype_attr()}, {}, infer_fill, "a tensor of ones"};
  rules::kNoGradient.apply(ones);
  r.add(std::move(ones));
  OpDef full{"full",
             {},
             {"y"},
             {shape_attr(), {"value", AttrType::kFloat, true, {}}, dtype_attr()},
             {},
             infer_fill,
             "a tensor filled with value (exact for integer dtypes)"};
  rules::kNoGradient.apply(full);
  r.add(std::move(full));
  OpDef arange{"arange",
               {},
               {"y"},
               {{"start", AttrType::kFloat, false, AttrValue::of_float(0)},
                {"stop", AttrType::kFloat, true, {}},
                {"step", AttrType::kFloat, false, AttrValue::of_float(1)},
                dtype_attr()},
               {},
               infer_arange,
               "start, start + step, ... below stop (numpy's length rule)"};
  rules::kNoGradient.apply(arange);
  r.add(std::move(arange));
  OpDef eye{"eye",
            {},
            {"y"},
            {{"n", AttrType::kInt, true, {}}, {"m", AttrType::kInt, false, AttrValue::of_int(-1)}, dtype_attr()},
            {},
            infer_eye,
            "an n x m matrix (m = -1: n x n) with ones on the diagonal"};
  rules::kNoGradient.apply(eye);
  r.add(std::move(eye));
}

SPORA_OP_FAMILY(register_creation_ops);

}  // namespace spora
