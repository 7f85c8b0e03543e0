#include "ir/dtype.h"

namespace spora {

size_t dtype_size(DType t) {
  switch (t) {
    case SPORA_DTYPE_F32: case SPORA_DTYPE_I32: return 4;
    case SPORA_DTYPE_F64: case SPORA_DTYPE_I64: return 8;
    case SPORA_DTYPE_F16: case SPORA_DTYPE_BF16: return 2;
    case SPORA_DTYPE_U8: case SPORA_DTYPE_BOOL: return 1;
    default: return 0;
  }
}

const char* dtype_name(DType t) {
  switch (t) {
    case SPORA_DTYPE_F32: return "f32";
    case SPORA_DTYPE_F64: return "f64";
    case SPORA_DTYPE_F16: return "f16";
    case SPORA_DTYPE_BF16: return "bf16";
    case SPORA_DTYPE_I32: return "i32";
    case SPORA_DTYPE_I64: return "i64";
    case SPORA_DTYPE_U8: return "u8";
    case SPORA_DTYPE_BOOL: return "bool";
    default: return "invalid";
  }
}

bool dtype_valid(int32_t t) { return t >= SPORA_DTYPE_F32 && t <= SPORA_DTYPE_BOOL; }

bool dtype_is_float(DType t) {
  return t == SPORA_DTYPE_F32 || t == SPORA_DTYPE_F64 || t == SPORA_DTYPE_F16 || t == SPORA_DTYPE_BF16;
}

}  // namespace spora
