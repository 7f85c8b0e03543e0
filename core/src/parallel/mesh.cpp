#include "parallel/mesh.h"

#include <fmt/format.h>

#include "support/error.h"

namespace spora::parallel {

int64_t Mesh::device_num() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t Mesh::coord(int axis) const {
  int64_t stride = 1;
  for (int a = axes() - 1; a > axis; --a) stride *= shape[static_cast<size_t>(a)];
  return (rank / stride) % shape[static_cast<size_t>(axis)];
}

int Mesh::axis_named(const std::string& name) const {
  for (size_t a = 0; a < names.size(); ++a)
    if (names[a] == name) return static_cast<int>(a);
  return -1;
}

std::string Mesh::str() const {
  std::string s = fmt::format("({})", fmt::join(shape, ", "));
  if (!names.empty()) s += fmt::format(" named ({})", fmt::join(names, ", "));
  return s;
}

void Mesh::check() const {
  if (shape.empty() || shape.size() > 16) fail(Code::kInvalidArgument, "[parallel] a mesh needs 1 to 16 axes, got {}", shape.size());
  for (int64_t s : shape)
    if (s < 1) fail(Code::kInvalidArgument, "[parallel] mesh {} has an axis of size {}", str(), s);
  if (!names.empty() && names.size() != shape.size())
    fail(Code::kInvalidArgument, "[parallel] mesh {} has {} axes but {} names", str(), shape.size(), names.size());
  for (size_t a = 0; a < names.size(); ++a)
    for (size_t b = a + 1; b < names.size(); ++b)
      if (names[a] == names[b]) fail(Code::kInvalidArgument, "[parallel] mesh {} names two axes '{}'", str(), names[a]);
  if (rank < 0 || rank >= device_num())
    fail(Code::kInvalidArgument, "[parallel] rank {} is outside mesh {} of {} devices", rank, str(), device_num());
  if (groups.size() != shape.size())
    fail(Code::kInvalidArgument, "[parallel] mesh {} needs one communicator per axis, got {}", str(), groups.size());
}

}  // namespace spora::parallel
