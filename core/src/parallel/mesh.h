// A device mesh: the job's ranks arranged as a grid, one size (and optional
// name) per axis, ranks in row-major order. Each axis has its communicator:
// the ranks that differ only in their coordinate along it, ordered by that
// coordinate (for a 1-D mesh, the world). docs/parallel.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace spora::parallel {

struct Mesh {
  std::vector<int64_t> shape;       // devices along each axis
  std::vector<std::string> names;   // empty, or one per axis
  int64_t rank = 0;                 // this process's rank in the whole job
  std::vector<int64_t> groups;      // communicator id (spora_comm_id) per axis

  int axes() const { return static_cast<int>(shape.size()); }
  int64_t device_num() const;
  // This rank's coordinate along `axis`.
  int64_t coord(int axis) const;
  // The axis called `name`, or -1.
  int axis_named(const std::string& name) const;
  // "(2, 2) named (dp, mp)".
  std::string str() const;
  // Throws kInvalidArgument on sizes < 1, a rank outside the mesh, names or
  // groups of the wrong count, duplicate names.
  void check() const;
};

}  // namespace spora::parallel
