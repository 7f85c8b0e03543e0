// Random augmentations: random_horizontal_flip, random_crop (with padding).
//
// Each sample's draws are Philox words for (seed, stream, sample index):
// word 0 decides the flip; words 0 and 1 pick the crop's top and left.
#include <cstring>

#include "data/node.h"
#include "data/transforms.h"
#include <spora/sdk/philox.h>
#include "support/error.h"

namespace spora::data {
namespace {

// H and W of an HWC or HW image; bytes per pixel (all channels).
struct ImageDims {
  int64_t h, w, pixel_bytes;
};
ImageDims image_dims(const Column& in, const char* who) {
  if (in.shape.size() != 2 && in.shape.size() != 3)
    fail(Code::kInvalidArgument, "[dataset {}] expects an HWC or HW image, got shape {}", who, shape_str(in.shape));
  const int64_t c = in.shape.size() == 3 ? in.shape[2] : 1;
  return {in.shape[0], in.shape[1], c * static_cast<int64_t>(dtype_size(in.dtype))};
}

class RandomHorizontalFlip final : public Transform {
 public:
  explicit RandomHorizontalFlip(double p) : p_(p) {}
  const char* name() const override { return "random_horizontal_flip"; }
  Column apply(const Column& in, const RandomKey& key) const override {
    const ImageDims d = image_dims(in, name());
    const PhiloxWords w = philox_words(key.seed, key.stream, key.index);
    if (!(plugin::uniform24(w.w[0]) < p_)) return in;
    Column out = make_column(in.dtype, in.shape);
    const uint8_t* x = in.bytes.data();
    uint8_t* y = out.bytes.data();
    const size_t pb = static_cast<size_t>(d.pixel_bytes);
    for (int64_t r = 0; r < d.h; ++r)
      for (int64_t c = 0; c < d.w; ++c)
        std::memcpy(y + (r * d.w + c) * pb, x + (r * d.w + (d.w - 1 - c)) * pb, pb);
    return out;
  }

 private:
  double p_;
};

class RandomCrop final : public Transform {
 public:
  RandomCrop(int64_t h, int64_t w, int64_t left, int64_t top, int64_t right, int64_t bottom, int64_t fill)
      : h_(h), w_(w), l_(left), t_(top), r_(right), b_(bottom), fill_(fill) {}
  const char* name() const override { return "random_crop"; }
  Column apply(const Column& in, const RandomKey& key) const override {
    const ImageDims d = image_dims(in, name());
    const int64_t ph = d.h + t_ + b_, pw = d.w + l_ + r_;  // padded size
    if (h_ > ph || w_ > pw)
      fail(Code::kInvalidArgument, "[dataset random_crop] crop {}x{} is larger than the padded image {}x{} (shape {})",
           h_, w_, ph, pw, shape_str(in.shape));
    const PhiloxWords rw = philox_words(key.seed, key.stream, key.index);
    const int64_t top = static_cast<int64_t>(uniform_below(rw.w[0], static_cast<uint64_t>(ph - h_ + 1)));
    const int64_t left = static_cast<int64_t>(uniform_below(rw.w[1], static_cast<uint64_t>(pw - w_ + 1)));
    std::vector<int64_t> shape = in.shape;
    shape[0] = h_;
    shape[1] = w_;
    Column out = make_column(in.dtype, shape);
    // The fill value in the image's dtype, one pixel's worth.
    Column fill1 = make_column(SPORA_DTYPE_I64, {1});
    fill1.as<int64_t>()[0] = fill_;
    const Column fill = cast_column(fill1, in.dtype, name());
    const size_t es = dtype_size(in.dtype), pb = static_cast<size_t>(d.pixel_bytes);
    const uint8_t* x = in.bytes.data();
    uint8_t* y = out.bytes.data();
    for (int64_t r = 0; r < h_; ++r) {
      const int64_t sr = top + r - t_;  // source row in the unpadded image
      for (int64_t c = 0; c < w_; ++c) {
        const int64_t sc = left + c - l_;
        uint8_t* dst = y + (r * w_ + c) * pb;
        if (sr >= 0 && sr < d.h && sc >= 0 && sc < d.w) {
          std::memcpy(dst, x + (sr * d.w + sc) * pb, pb);
        } else {
          for (size_t k = 0; k < pb; k += es) std::memcpy(dst + k, fill.bytes.data(), es);
        }
      }
    }
    return out;
  }

 private:
  int64_t h_, w_, l_, t_, r_, b_, fill_;
};

}  // namespace

TransformPtr make_random_transform(const std::string& name, const Attrs& a) {
  if (name == "random_horizontal_flip") {
    const double p = attr_float(a, "random_horizontal_flip", "prob", 0.5, false);
    if (!(p >= 0 && p <= 1)) fail(Code::kInvalidArgument, "[dataset random_horizontal_flip] prob {} is outside [0, 1]", p);
    return std::make_shared<RandomHorizontalFlip>(p);
  }
  if (name == "random_crop") {
    const std::vector<int64_t> size = attr_ints(a, "random_crop", "size");
    if (size.size() != 1 && size.size() != 2)
      fail(Code::kInvalidArgument, "[dataset random_crop] 'size' must be [s] or [h, w], got {} values", size.size());
    const int64_t h = size[0], w = size.size() == 2 ? size[1] : size[0];
    if (h <= 0 || w <= 0) fail(Code::kInvalidArgument, "[dataset random_crop] size {}x{} must be positive", h, w);
    std::vector<int64_t> p = attr_ints(a, "random_crop", "padding");
    // MindSpore's forms: p (all sides), (left/right, top/bottom), (left, top, right, bottom).
    int64_t l = 0, t = 0, r = 0, b = 0;
    if (p.size() == 1) l = t = r = b = p[0];
    else if (p.size() == 2) { l = r = p[0]; t = b = p[1]; }
    else if (p.size() == 4) { l = p[0]; t = p[1]; r = p[2]; b = p[3]; }
    else if (!p.empty())
      fail(Code::kInvalidArgument, "[dataset random_crop] 'padding' takes 1, 2 or 4 values, got {}", p.size());
    for (int64_t v : {l, t, r, b})
      if (v < 0 || v > (1 << 20)) fail(Code::kInvalidArgument, "[dataset random_crop] padding {} is out of range", v);
    const double fill = attr_float(a, "random_crop", "fill_value", 0, false);
    return std::make_shared<RandomCrop>(h, w, l, t, r, b, static_cast<int64_t>(fill));
  }
  return nullptr;
}

}  // namespace spora::data
