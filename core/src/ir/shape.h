// Tensor shapes: a fixed-capacity dimension array (no heap allocation, which
// keeps eager dispatch cheap) and numpy broadcasting.
#pragma once
#include <spora/spora.h>

#include <cstdint>
#include <string>

namespace spora {

constexpr int kMaxRank = SPORA_MAX_NDIM;

struct Shape {
  int32_t rank = 0;
  int64_t dims[kMaxRank] = {};

  Shape() = default;
  // Validates rank, non-negative dims and that the element count fits in
  // int64; `op` names the caller in the error.
  static Shape from(const int64_t* dims, int32_t rank, const char* op);

  int64_t operator[](int i) const { return dims[i]; }
  int64_t numel() const;  // never overflows: checked on construction
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  void push_back(int64_t d);
  std::string str() const;  // "(2,3)"
};

// numpy broadcasting of two shapes; fails naming `op` when they don't fit.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// `s` with leading 1s so that its rank is `rank`.
Shape pad_to_rank(const Shape& s, int32_t rank);

// Normalises a possibly negative axis against `rank`; fails naming `op`.
int32_t normalize_axis(int64_t axis, int32_t rank, const char* op);

}  // namespace spora
