#include "data/column.h"

#include <fmt/format.h>

#include "support/error.h"

namespace spora::data {

std::string shape_str(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

Column make_column(DType dtype, std::vector<int64_t> shape) {
  Column c;
  c.dtype = dtype;
  c.shape = std::move(shape);
  const int64_t n = c.numel();
  if (n < 0) fail(Code::kInvalidArgument, "[dataset] negative dimension in {}", shape_str(c.shape));
  c.bytes.assign(static_cast<size_t>(n) * dtype_size(dtype), 0);
  return c;
}

}  // namespace spora::data
