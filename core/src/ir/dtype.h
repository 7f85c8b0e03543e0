// Element types of the core (values are the ABI's spora_dtype_t).
#pragma once
#include <spora/spora.h>

#include <cstddef>
#include <string>

namespace spora {

using DType = spora_dtype_t;

size_t dtype_size(DType t);          // 0 for invalid values
const char* dtype_name(DType t);     // "f32"...; "invalid"
bool dtype_valid(int32_t t);
bool dtype_is_float(DType t);

}  // namespace spora
