#include "ir/shape.h"

#include <limits>

#include "support/error.h"

namespace spora {

Shape Shape::from(const int64_t* dims, int32_t rank, const char* op) {
  if (rank < 0 || rank > kMaxRank) fail(Code::kInvalidArgument, "[{}] rank {} is outside 0..{}", op, rank, kMaxRank);
  if (rank > 0 && !dims) fail(Code::kInvalidArgument, "[{}] shape pointer is null for rank {}", op, rank);
  Shape s;
  s.rank = rank;
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] < 0) fail(Code::kInvalidArgument, "[{}] dimension {} is negative ({})", op, i, dims[i]);
    s.dims[i] = dims[i];
    if (dims[i] != 0 && n > std::numeric_limits<int64_t>::max() / dims[i])
      fail(Code::kInvalidArgument, "[{}] shape {} has more elements than fit in int64", op, s.str());
    n *= dims[i];
  }
  return s;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank != o.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (dims[i] != o.dims[i]) return false;
  return true;
}

void Shape::push_back(int64_t d) {
  if (rank >= kMaxRank) fail(Code::kInvalidArgument, "[shape] rank would exceed {}", kMaxRank);
  dims[rank++] = d;
}

std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ",";
    s += std::to_string(dims[i]);
  }
  if (rank == 1) s += ",";
  return s + ")";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  Shape out;
  out.rank = a.rank > b.rank ? a.rank : b.rank;
  for (int i = 0; i < out.rank; ++i) {
    const int ia = i - (out.rank - a.rank), ib = i - (out.rank - b.rank);
    const int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
    if (da != db && da != 1 && db != 1)
      fail(Code::kInvalidArgument, "[{}] shapes {} and {} do not broadcast", op, a.str(), b.str());
    out.dims[i] = da == 1 ? db : da;
  }
  return out;
}

Shape pad_to_rank(const Shape& s, int32_t rank) {
  Shape out;
  out.rank = rank;
  const int lead = rank - s.rank;
  for (int i = 0; i < rank; ++i) out.dims[i] = i < lead ? 1 : s.dims[i - lead];
  return out;
}

int32_t normalize_axis(int64_t axis, int32_t rank, const char* op) {
  const int64_t lo = rank == 0 ? -1 : -rank, hi = rank == 0 ? 0 : rank - 1;
  if (axis < lo || axis > hi)
    fail(Code::kInvalidArgument, "[{}] axis {} is out of range for rank {}", op, axis, rank);
  return static_cast<int32_t>(axis < 0 ? axis + (rank == 0 ? 1 : rank) : axis);
}

}  // namespace spora
