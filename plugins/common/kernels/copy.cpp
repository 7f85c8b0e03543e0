// The strided copy engine and fills behind the layout kernels (copy.h).
#include "copy.h"

#include <cmath>

namespace spora::plugin {
namespace {

// One run of n output elements reading x with step `is` (elements).
template <class E>
void copy_run(const char* x, int64_t is, int64_t n, char* y) {
  const E* src = reinterpret_cast<const E*>(x);
  E* dst = reinterpret_cast<E*>(y);
  if (is == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(E));
  } else if (is == 0) {
    const E v = *src;
    for (int64_t j = 0; j < n; ++j) dst[j] = v;
  } else if (is == -1) {
    for (int64_t j = 0; j < n; ++j) dst[j] = src[-j];
  } else {
    for (int64_t j = 0; j < n; ++j) dst[j] = src[j * is];
  }
}

template <class E>
void run_t(const StridedCopy& c, const char* x, char* y, int64_t begin, int64_t end) {
  const int r = c.rank;
  const int64_t inner = c.dims[r - 1], is = c.stride[r - 1];
  int64_t idx[kMaxCopyRank] = {};
  int64_t off = c.offset;  // source element of the current output element
  for (int64_t d = r - 1, rem = begin; d >= 0; --d) {
    idx[d] = rem % c.dims[d];
    rem /= c.dims[d];
    off += idx[d] * c.stride[d];
  }
  y += begin * static_cast<int64_t>(sizeof(E));
  for (int64_t pos = begin; pos < end;) {
    const int64_t j0 = idx[r - 1];
    const int64_t n = inner - j0 < end - pos ? inner - j0 : end - pos;
    copy_run<E>(x + off * static_cast<int64_t>(sizeof(E)), is, n, y);
    y += n * static_cast<int64_t>(sizeof(E));
    pos += n;
    // Back to the row's start, then an odometer step over the outer dims.
    off -= j0 * is;
    idx[r - 1] = 0;
    for (int d = r - 2; d >= 0; --d) {
      off += c.stride[d];
      if (++idx[d] < c.dims[d]) break;
      off -= c.stride[d] * c.dims[d];
      idx[d] = 0;
    }
  }
}

// A transpose-like copy: output dim k reads x contiguously (step +-1) while
// the innermost output dim jumps. Walking rows would touch a new cache line
// (and often a new page) per element; square tiles of the (k, last) plane
// reuse every line they load.
int tiled_dim(const StridedCopy& c) {
  const int r = c.rank;
  const int64_t is = c.stride[r - 1];
  if (r < 2 || is == 0 || is == 1 || is == -1 || c.dims[r - 1] < 8) return -1;
  for (int k = r - 2; k >= 0; --k)
    if ((c.stride[k] == 1 || c.stride[k] == -1) && c.dims[k] >= 8) return k;
  return -1;
}

template <class E>
void run_tiled(const StridedCopy& c, int k, const char* xb, char* yb) {
  constexpr int64_t kTile = 32;
  const E* x = reinterpret_cast<const E*>(xb);
  E* y = reinterpret_cast<E*>(yb);
  const int r = c.rank;
  int64_t ost[kMaxCopyRank];
  int64_t st = 1;
  for (int d = r - 1; d >= 0; --d) {
    ost[d] = st;
    st *= c.dims[d];
  }
  const int64_t na = c.dims[k], nb = c.dims[r - 1], sa = c.stride[k], sb = c.stride[r - 1], oa = ost[k];
  const int64_t planes = c.numel / (na * nb);
  int64_t idx[kMaxCopyRank] = {};
  int64_t xo = c.offset, yo = 0;
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t a0 = 0; a0 < na; a0 += kTile) {
      const int64_t a1 = a0 + kTile < na ? a0 + kTile : na;
      for (int64_t b0 = 0; b0 < nb; b0 += kTile) {
        const int64_t b1 = b0 + kTile < nb ? b0 + kTile : nb;
        for (int64_t a = a0; a < a1; ++a) {
          const E* src = x + xo + a * sa;
          E* dst = y + yo + a * oa;
          for (int64_t b = b0; b < b1; ++b) dst[b] = src[b * sb];
        }
      }
    }
    // Next plane: an odometer over the dims other than k and the last.
    for (int d = r - 2; d >= 0; --d) {
      if (d == k) continue;
      xo += c.stride[d];
      yo += ost[d];
      if (++idx[d] < c.dims[d]) break;
      xo -= c.stride[d] * c.dims[d];
      yo -= ost[d] * c.dims[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

void StridedCopy::push(int64_t dim, int64_t step) {
  dims[rank] = dim;
  stride[rank] = step;
  ++rank;
}

void StridedCopy::simplify() {
  numel = 1;
  for (int d = 0; d < rank; ++d) numel *= dims[d];
  int n = 0;
  for (int d = 0; d < rank; ++d) {
    if (dims[d] == 1) continue;
    // Merge into the previous kept dim when stepping it equals running
    // through this one.
    if (n > 0 && stride[n - 1] == stride[d] * dims[d]) {
      dims[n - 1] *= dims[d];
      stride[n - 1] = stride[d];
      continue;
    }
    dims[n] = dims[d];
    stride[n] = stride[d];
    ++n;
  }
  if (n == 0) {
    dims[0] = 1;
    stride[0] = 1;
    n = 1;
  }
  rank = n;
}

void StridedCopy::run(const void* x, void* y, int64_t begin, int64_t end) const {
  if (end > numel) end = numel;
  if (begin >= end) return;
  const char* xs = static_cast<const char*>(x);
  char* ys = static_cast<char*>(y);
  const int k = begin == 0 && end == numel ? tiled_dim(*this) : -1;
  if (k >= 0) {
    switch (elem) {
      case 1: return run_tiled<uint8_t>(*this, k, xs, ys);
      case 2: return run_tiled<uint16_t>(*this, k, xs, ys);
      case 4: return run_tiled<uint32_t>(*this, k, xs, ys);
      case 8: return run_tiled<uint64_t>(*this, k, xs, ys);
    }
  }
  switch (elem) {
    case 1: return run_t<uint8_t>(*this, xs, ys, begin, end);
    case 2: return run_t<uint16_t>(*this, xs, ys, begin, end);
    case 4: return run_t<uint32_t>(*this, xs, ys, begin, end);
    case 8: return run_t<uint64_t>(*this, xs, ys, begin, end);
  }
}

void fill(void* y, const void* value, int64_t n, int64_t elem) {
  if (n <= 0) return;
  char* out = static_cast<char*>(y);
  bool zero = true;
  for (int64_t b = 0; b < elem; ++b) zero = zero && static_cast<const char*>(value)[b] == 0;
  if (zero) {
    std::memset(out, 0, static_cast<size_t>(n * elem));
    return;
  }
  auto loop = [&](auto tag) {
    using E = decltype(tag);
    E v;
    std::memcpy(&v, value, sizeof(E));
    E* dst = reinterpret_cast<E*>(out);
    for (int64_t j = 0; j < n; ++j) dst[j] = v;
  };
  switch (elem) {
    case 1: return loop(uint8_t{});
    case 2: return loop(uint16_t{});
    case 4: return loop(uint32_t{});
    case 8: return loop(uint64_t{});
  }
}

bool encode_value(int32_t dtype, double v, uint64_t* bits) {
  const bool whole = std::trunc(v) == v;
  switch (dtype) {
    case SPORA_DTYPE_I32:
      if (!whole || v < -2147483648.0 || v > 2147483647.0) return false;
      break;
    case SPORA_DTYPE_I64:
      if (!whole || v < -9223372036854775808.0 || v >= 9223372036854775808.0) return false;
      break;
    case SPORA_DTYPE_U8:
      if (!whole || v < 0 || v > 255) return false;
      break;
    case SPORA_DTYPE_BOOL:
      if (v != 0 && v != 1) return false;
      break;
    default: break;
  }
  *bits = 0;
  return visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T t = store<T>(static_cast<compute_t<T>>(v));
    std::memcpy(bits, &t, sizeof(T));
  });
}

void dense_strides(const Shape& s, int64_t* strides) {
  int64_t st = 1;
  for (int i = s.rank - 1; i >= 0; --i) {
    strides[i] = st;
    st *= s.dims[i];
  }
}

}  // namespace spora::plugin
