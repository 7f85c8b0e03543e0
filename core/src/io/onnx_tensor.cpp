#include "io/onnx_tensor.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sys/stat.h>

#include "support/error.h"

namespace spora::io::onnx {
namespace {

[[noreturn]] void bad(const std::string& what, const TensorProto& t, const std::string& msg) {
  fail(Code::kInvalidArgument, "[onnx] '{}': tensor '{}': {}", what, t.name, msg);
}


// Reads [offset, offset + length) of the external file named by
// `location`, after checking that it resolves inside `model_dir`.
std::vector<uint8_t> read_external(const TensorProto& t, const std::string& what, const std::string& model_dir,
                                   uint64_t want) {
  std::string location;
  uint64_t offset = 0, length = want;
  bool has_length = false;
  for (const auto& [k, v] : t.external_data) {
    auto num = [&, &v = v](const char* key) {
      char* end = nullptr;
      errno = 0;
      const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end || errno || v[0] == '-') bad(what, t, std::string("external_data ") + key + " '" + v + "' is not a number");
      return static_cast<uint64_t>(x);
    };
    if (k == "location") location = v;
    else if (k == "offset") offset = num("offset");
    else if (k == "length") { length = num("length"); has_length = true; }
  }
  if (location.empty()) bad(what, t, "external data without a location");
  if (location[0] == '/' || location.find('\0') != std::string::npos)
    bad(what, t, "external data location '" + location + "' must be a path relative to the model's directory");
  if (has_length && length != want)
    bad(what, t, "external data length " + std::to_string(length) + " but the tensor needs " + std::to_string(want) +
                     " bytes");
  char dir_real[PATH_MAX], file_real[PATH_MAX];
  if (!realpath(model_dir.c_str(), dir_real)) bad(what, t, "cannot resolve the model's directory");
  const std::string full = model_dir + "/" + location;
  if (!realpath(full.c_str(), file_real))
    fail(Code::kNotFound, "[onnx] '{}': tensor '{}': external data file '{}' not found", what, t.name, location);
  const std::string d = dir_real, f = file_real;
  if (f.compare(0, d.size(), d) != 0 || f.size() <= d.size() || (f[d.size()] != '/' && d != "/"))
    bad(what, t, "external data location '" + location + "' escapes the model's directory");
  struct stat st;
  if (stat(file_real, &st) != 0 || !S_ISREG(st.st_mode))
    bad(what, t, "external data '" + location + "' is not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset > size || want > size - offset)
    bad(what, t, "external data '" + location + "' has " + std::to_string(size) + " bytes; [" + std::to_string(offset) +
                     ", +" + std::to_string(want) + ") runs past its end");
  std::ifstream in(file_real, std::ios::binary);
  std::vector<uint8_t> out(want);
  in.seekg(static_cast<std::streamoff>(offset));
  if (want && !in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(want)))
    fail(Code::kIo, "[onnx] '{}': tensor '{}': read error in external data '{}'", what, t.name, location);
  return out;
}

}  // namespace

DType spora_dtype(int32_t onnx_type) {
  switch (onnx_type) {
    case kFloat: return SPORA_DTYPE_F32;
    case kDouble: return SPORA_DTYPE_F64;
    case kFloat16: return SPORA_DTYPE_F16;
    case kBfloat16: return SPORA_DTYPE_BF16;
    case kInt32: return SPORA_DTYPE_I32;
    case kInt64: return SPORA_DTYPE_I64;
    case kUint8: return SPORA_DTYPE_U8;
    case kBool: return SPORA_DTYPE_BOOL;
    default: return SPORA_DTYPE_INVALID;
  }
}

HostTensor decode_tensor(const TensorProto& t, const std::string& what, const std::string& model_dir) {
  HostTensor h;
  h.dtype = spora_dtype(t.data_type);
  if (h.dtype == SPORA_DTYPE_INVALID)
    bad(what, t, std::string("element type ") + data_type_name(t.data_type) +
                     " is not supported (float, double, float16, bfloat16, int32, int64, uint8, bool)");
  if (t.dims.size() > static_cast<size_t>(kMaxRank))
    bad(what, t, "rank " + std::to_string(t.dims.size()) + " exceeds " + std::to_string(kMaxRank));
  uint64_t numel = 1;
  for (int64_t d : t.dims) {
    if (d < 0) bad(what, t, "dimension " + std::to_string(d) + " is negative");
    if (d && numel > std::numeric_limits<uint64_t>::max() / 16 / static_cast<uint64_t>(d))
      bad(what, t, "its dimensions overflow");
    numel *= static_cast<uint64_t>(d);
  }
  h.shape = Shape::from(t.dims.data(), static_cast<int32_t>(t.dims.size()), "onnx");
  const size_t es = dtype_size(h.dtype);
  const uint64_t want = numel * es;
  if (t.has_string) bad(what, t, "string data is not supported");
  if (t.data_location == 1 || !t.external_data.empty()) {
    if (model_dir.empty()) bad(what, t, "external data is not allowed here");
    h.bytes = read_external(t, what, model_dir, want);
    return h;
  }
  auto count_is = [&](size_t n, const char* field) {
    if (n != numel)
      bad(what, t, std::string(field) + " holds " + std::to_string(n) + " values but dims need " +
                       std::to_string(numel) + (n < numel ? " (truncated?)" : ""));
  };
  if (t.has_raw) {
    if (t.raw_data.size != want)
      bad(what, t, "raw_data is " + std::to_string(t.raw_data.size) + " bytes but " + data_type_name(t.data_type) +
                       " " + h.shape.str() + " needs " + std::to_string(want));
    h.bytes.assign(t.raw_data.data, t.raw_data.data + t.raw_data.size);
    if (h.dtype == SPORA_DTYPE_BOOL)
      for (uint8_t& b : h.bytes) b = b != 0;
    return h;
  }
  // Typed fields: the count is known to be backed by bytes in the file (each
  // value took at least one byte), so allocating numel * es is safe.
  switch (t.data_type) {
    case kFloat:
      count_is(t.float_data.size(), "float_data");
      h.bytes.resize(want);
      if (want) std::memcpy(h.bytes.data(), t.float_data.data(), want);
      break;
    case kDouble:
      count_is(t.double_data.size(), "double_data");
      h.bytes.resize(want);
      if (want) std::memcpy(h.bytes.data(), t.double_data.data(), want);
      break;
    case kInt64:
      count_is(t.int64_data.size(), "int64_data");
      h.bytes.resize(want);
      if (want) std::memcpy(h.bytes.data(), t.int64_data.data(), want);
      break;
    case kInt32:
    case kUint8:
    case kBool:
    case kFloat16:
    case kBfloat16: {
      count_is(t.int32_data.size(), "int32_data");
      h.bytes.resize(want);
      for (size_t i = 0; i < numel; ++i) {
        const int64_t v = t.int32_data[i];
        if (h.dtype == SPORA_DTYPE_I32) {
          const int32_t x = static_cast<int32_t>(v);
          std::memcpy(&h.bytes[4 * i], &x, 4);
        } else if (h.dtype == SPORA_DTYPE_U8 || h.dtype == SPORA_DTYPE_BOOL) {
          h.bytes[i] = h.dtype == SPORA_DTYPE_BOOL ? (v != 0) : static_cast<uint8_t>(v);
        } else {  // the 16 bits of a float16 / bfloat16
          const uint16_t x = static_cast<uint16_t>(v);
          std::memcpy(&h.bytes[2 * i], &x, 2);
        }
      }
      break;
    }
    default: bad(what, t, "no data");
  }
  return h;
}

}  // namespace spora::io::onnx
