// Deterministic transforms: type_cast, rescale, normalize, one_hot, hwc2chw.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "data/image_decode.h"
#include "data/transforms.h"
#include "support/error.h"

namespace spora::data {

double attr_float(const Attrs& a, const char* op, const char* name, double dflt, bool required) {
  const AttrValue* v = a.find(name);
  if (!v) {
    if (required) fail(Code::kInvalidArgument, "[dataset {}] attribute '{}' is required", op, name);
    return dflt;
  }
  if (v->type == AttrType::kFloat) return v->f;
  if (v->type == AttrType::kInt || v->type == AttrType::kBool) return static_cast<double>(v->i);
  fail(Code::kInvalidArgument, "[dataset {}] attribute '{}' must be a number, got {}", op, name, attr_type_name(v->type));
}

std::vector<int64_t> attr_ints(const Attrs& a, const char* op, const char* name) {
  const AttrValue* v = a.find(name);
  if (!v) return {};
  if (v->type == AttrType::kInts) return v->ints;
  if (v->type == AttrType::kInt) return {v->i};
  fail(Code::kInvalidArgument, "[dataset {}] attribute '{}' must be integers, got {}", op, name, attr_type_name(v->type));
}

std::vector<double> attr_floats(const Attrs& a, const char* op, const char* name) {
  const AttrValue* v = a.find(name);
  if (!v) return {};
  if (v->type == AttrType::kFloats) return v->floats;
  if (v->type == AttrType::kFloat) return {v->f};
  if (v->type == AttrType::kInts) return std::vector<double>(v->ints.begin(), v->ints.end());
  if (v->type == AttrType::kInt) return {static_cast<double>(v->i)};
  fail(Code::kInvalidArgument, "[dataset {}] attribute '{}' must be numbers, got {}", op, name, attr_type_name(v->type));
}

namespace {

// Element i of a column of any supported dtype, as double.
template <class Fn>
void visit(DType t, const char* who, Fn&& fn) {
  switch (t) {
    case SPORA_DTYPE_U8: fn(uint8_t{}); break;
    case SPORA_DTYPE_BOOL: fn(bool{}); break;
    case SPORA_DTYPE_I32: fn(int32_t{}); break;
    case SPORA_DTYPE_I64: fn(int64_t{}); break;
    case SPORA_DTYPE_F32: fn(float{}); break;
    case SPORA_DTYPE_F64: fn(double{}); break;
    default: fail(Code::kUnimplemented, "[dataset {}] dtype {} is not supported", who, dtype_name(t));
  }
}

template <class T>
void to_f32(const Column& in, float* out, double scale, double shift) {
  const T* x = in.as<T>();
  const int64_t n = in.numel();
  const float s = static_cast<float>(scale), b = static_cast<float>(shift);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i]) * s + b;
}

// x * scale + shift in f32, from any supported dtype.
Column affine_f32(const Column& in, double scale, double shift, const char* who) {
  Column out = make_column(SPORA_DTYPE_F32, in.shape);
  visit(in.dtype, who, [&](auto tag) { to_f32<decltype(tag)>(in, out.as<float>(), scale, shift); });
  return out;
}

class TypeCast final : public Transform {
 public:
  explicit TypeCast(DType t) : t_(t) {}
  const char* name() const override { return "type_cast"; }
  Column apply(const Column& in, const RandomKey&) const override { return cast_column(in, t_, "type_cast"); }

 private:
  DType t_;
};

class Rescale final : public Transform {
 public:
  Rescale(double scale, double shift) : scale_(scale), shift_(shift) {}
  const char* name() const override { return "rescale"; }
  Column apply(const Column& in, const RandomKey&) const override {
    return affine_f32(in, scale_, shift_, "rescale");
  }

 private:
  double scale_, shift_;
};

class Normalize final : public Transform {
 public:
  Normalize(std::vector<double> mean, std::vector<double> std, bool hwc)
      : mean_(std::move(mean)), std_(std::move(std)), hwc_(hwc) {}
  const char* name() const override { return "normalize"; }
  Column apply(const Column& in, const RandomKey&) const override {
    if (in.shape.size() != 2 && in.shape.size() != 3)
      fail(Code::kInvalidArgument, "[dataset normalize] expects an HWC or HW image, got shape {}", shape_str(in.shape));
    const bool three = in.shape.size() == 3;
    const int64_t c = three ? (hwc_ ? in.shape[2] : in.shape[0]) : 1;
    if (static_cast<int64_t>(mean_.size()) != c && mean_.size() != 1)
      fail(Code::kInvalidArgument, "[dataset normalize] {} means for an image of {} channels (shape {})",
           mean_.size(), c, shape_str(in.shape));
    Column out = affine_f32(in, 1.0, 0.0, "normalize");
    float* y = out.as<float>();
    const int64_t n = out.numel();
    // One multiply-add per element: (x - m) / s == x * (1/s) + (-m/s).
    std::vector<float> a(c), b(c);
    for (int64_t k = 0; k < c; ++k) {
      const double m = mean_.size() == 1 ? mean_[0] : mean_[k];
      const double s = std_.size() == 1 ? std_[0] : std_[k];
      a[k] = static_cast<float>(1.0 / s);
      b[k] = static_cast<float>(-m / s);
    }
    if (c == 1) {
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] * a[0] + b[0];
    } else if (hwc_) {
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] * a[i % c] + b[i % c];
    } else {
      const int64_t plane = n / c;
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] * a[i / plane] + b[i / plane];
    }
    return out;
  }

 private:
  std::vector<double> mean_, std_;
  bool hwc_;
};

class OneHot final : public Transform {
 public:
  explicit OneHot(int64_t n) : n_(n) {}
  const char* name() const override { return "one_hot"; }
  Column apply(const Column& in, const RandomKey&) const override {
    if (in.numel() != 1)
      fail(Code::kInvalidArgument, "[dataset one_hot] expects a scalar label, got shape {}", shape_str(in.shape));
    if (dtype_is_float(in.dtype) || in.dtype == SPORA_DTYPE_BOOL)
      fail(Code::kInvalidArgument, "[dataset one_hot] expects an integer label, got {}", dtype_name(in.dtype));
    const Column as64 = cast_column(in, SPORA_DTYPE_I64, "one_hot");
    const int64_t label = as64.as<int64_t>()[0];
    if (label < 0 || label >= n_)
      fail(Code::kInvalidArgument, "[dataset one_hot] label {} is outside [0, {})", label, n_);
    Column out64 = make_column(SPORA_DTYPE_I64, {n_});
    out64.as<int64_t>()[label] = 1;
    return cast_column(out64, in.dtype, "one_hot");
  }

 private:
  int64_t n_;
};

class Hwc2Chw final : public Transform {
 public:
  const char* name() const override { return "hwc2chw"; }
  Column apply(const Column& in, const RandomKey&) const override {
    if (in.shape.size() == 2) {  // HW: one channel, nothing moves
      Column out = in;
      out.shape.insert(out.shape.begin(), 1);
      return out;
    }
    if (in.shape.size() != 3)
      fail(Code::kInvalidArgument, "[dataset hwc2chw] expects an HWC image, got shape {}", shape_str(in.shape));
    const int64_t h = in.shape[0], w = in.shape[1], c = in.shape[2];
    const size_t es = dtype_size(in.dtype);
    Column out = make_column(in.dtype, {c, h, w});
    const uint8_t* x = in.bytes.data();
    uint8_t* y = out.bytes.data();
    for (int64_t p = 0; p < h * w; ++p)
      for (int64_t k = 0; k < c; ++k) std::memcpy(y + (k * h * w + p) * es, x + (p * c + k) * es, es);
    return out;
  }
};

// Encoded JPEG/PNG bytes (a 1-D uint8 column) -> HWC uint8 RGB.
class Decode final : public Transform {
 public:
  const char* name() const override { return "decode"; }
  Column apply(const Column& in, const RandomKey&) const override {
    if (in.dtype != SPORA_DTYPE_U8 || in.shape.size() != 1)
      fail(Code::kInvalidArgument, "[dataset decode] expects the encoded image as 1-D uint8 bytes, got {} {}",
           dtype_name(in.dtype), shape_str(in.shape));
    return decode_image(in.bytes.data(), in.bytes.size(), "image");
  }
};

}  // namespace

Column cast_column(const Column& in, DType dtype, const char* who) {
  if (in.dtype == dtype) return in;
  Column out = make_column(dtype, in.shape);
  const int64_t n = in.numel();
  visit(in.dtype, who, [&](auto src_tag) {
    using S = decltype(src_tag);
    const S* x = in.as<S>();
    visit(dtype, who, [&](auto dst_tag) {
      using D = decltype(dst_tag);
      D* y = out.as<D>();
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<D, bool>) {
          y[i] = x[i] != S{};
        } else if constexpr (std::is_floating_point_v<S> && !std::is_floating_point_v<D>) {
          // Out-of-range and NaN float -> int is undefined in C++: clamp.
          const double v = static_cast<double>(x[i]);
          const double lo = static_cast<double>(std::numeric_limits<D>::lowest());
          const double hi = static_cast<double>(std::numeric_limits<D>::max());
          y[i] = std::isnan(v) ? D{} : v <= lo ? std::numeric_limits<D>::lowest()
                                   : v >= hi ? std::numeric_limits<D>::max() : static_cast<D>(v);
        } else {
          y[i] = static_cast<D>(x[i]);
        }
      }
    });
  });
  return out;
}

TransformPtr make_basic_transform(const std::string& name, const Attrs& a) {
  if (name == "type_cast") {
    const AttrValue* v = a.find("dtype");
    if (!v || v->type != AttrType::kString)
      fail(Code::kInvalidArgument, "[dataset type_cast] string attribute 'dtype' is required");
    for (int t = 1; t <= 8; ++t)
      if (v->s == dtype_name(static_cast<DType>(t))) {
        if (t == SPORA_DTYPE_F16 || t == SPORA_DTYPE_BF16)
          fail(Code::kUnimplemented, "[dataset type_cast] dtype {} is not supported in the data pipeline", v->s);
        return std::make_shared<TypeCast>(static_cast<DType>(t));
      }
    fail(Code::kInvalidArgument, "[dataset type_cast] unknown dtype '{}'", v->s);
  }
  if (name == "rescale")
    return std::make_shared<Rescale>(attr_float(a, "rescale", "rescale", 0, true),
                                     attr_float(a, "rescale", "shift", 0, false));
  if (name == "normalize") {
    std::vector<double> mean = attr_floats(a, "normalize", "mean"), sd = attr_floats(a, "normalize", "std");
    if (mean.empty() || mean.size() != sd.size())
      fail(Code::kInvalidArgument, "[dataset normalize] 'mean' and 'std' must be non-empty and equally long ({} vs {})",
           mean.size(), sd.size());
    for (double s : sd)
      if (!(s > 0) || !std::isfinite(s)) fail(Code::kInvalidArgument, "[dataset normalize] std {} must be positive", s);
    const AttrValue* hwc = a.find("is_hwc");
    return std::make_shared<Normalize>(std::move(mean), std::move(sd), hwc ? hwc->i != 0 : true);
  }
  if (name == "one_hot") {
    const double n = attr_float(a, "one_hot", "num_classes", 0, true);
    if (n < 1 || n > (1 << 24) || n != std::floor(n))
      fail(Code::kInvalidArgument, "[dataset one_hot] num_classes {} must be a positive integer", n);
    return std::make_shared<OneHot>(static_cast<int64_t>(n));
  }
  if (name == "hwc2chw") return std::make_shared<Hwc2Chw>();
  if (name == "decode") return std::make_shared<Decode>();
  return nullptr;
}

TransformPtr make_transform(const std::string& name, const Attrs& attrs) {
  if (TransformPtr t = make_basic_transform(name, attrs)) return t;
  if (TransformPtr t = make_random_transform(name, attrs)) return t;
  fail(Code::kNotFound,
       "[dataset] unknown transform '{}' (known: type_cast, rescale, normalize, one_hot, hwc2chw, decode, "
       "random_horizontal_flip, random_crop)",
       name);
}

}  // namespace spora::data
