#include "npy.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace spora::cli {
namespace {

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw std::runtime_error(path + ": " + why);
}

struct DescrName {
  const char* descr;
  spora_dtype_t dtype;
};
// '<' little-endian, '|' not applicable (one byte); '=' is native, which
// is little-endian on every machine Spora builds for.
const DescrName kDescrs[] = {
    {"f4", SPORA_DTYPE_F32}, {"f8", SPORA_DTYPE_F64}, {"f2", SPORA_DTYPE_F16}, {"i4", SPORA_DTYPE_I32},
    {"i8", SPORA_DTYPE_I64}, {"u1", SPORA_DTYPE_U8},  {"b1", SPORA_DTYPE_BOOL},
};

// The value text of `key` in the header dict: from after "'key':" to the
// matching end (a quoted string, a parenthesised tuple or a bare word).
std::string dict_value(const std::string& path, const std::string& h, const char* key) {
  const std::string k = std::string("'") + key + "'";
  size_t p = h.find(k);
  if (p == std::string::npos) bad(path, std::string("the .npy header has no '") + key + "' entry");
  p += k.size();
  while (p < h.size() && (h[p] == ' ' || h[p] == ':')) ++p;
  if (p >= h.size()) bad(path, std::string("the .npy header's '") + key + "' entry is cut off");
  size_t e;
  if (h[p] == '\'') {
    e = h.find('\'', p + 1);
    if (e == std::string::npos) bad(path, std::string("the .npy header's '") + key + "' string is not closed");
    return h.substr(p + 1, e - p - 1);
  }
  if (h[p] == '(') {
    e = h.find(')', p);
    if (e == std::string::npos) bad(path, std::string("the .npy header's '") + key + "' tuple is not closed");
    return h.substr(p, e - p + 1);
  }
  e = p;
  while (e < h.size() && (std::isalnum(static_cast<unsigned char>(h[e])) || h[e] == '_')) ++e;
  return h.substr(p, e - p);
}

std::vector<int64_t> parse_shape(const std::string& path, const std::string& t) {
  std::vector<int64_t> dims;
  size_t p = 1;  // after '('
  while (p < t.size()) {
    while (p < t.size() && (t[p] == ' ' || t[p] == ',')) ++p;
    if (p >= t.size() || t[p] == ')') break;
    if (!std::isdigit(static_cast<unsigned char>(t[p]))) bad(path, "the .npy shape " + t + " is not a tuple of sizes");
    int64_t v = 0;
    while (p < t.size() && std::isdigit(static_cast<unsigned char>(t[p]))) {
      if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) bad(path, "the .npy shape " + t + " overflows");
      v = v * 10 + (t[p++] - '0');
    }
    while (p < t.size() && t[p] == 'L') ++p;  // Python 2 longs
    dims.push_back(v);
  }
  if (dims.size() > SPORA_MAX_NDIM)
    bad(path, "the .npy shape " + t + " has more than " + std::to_string(SPORA_MAX_NDIM) + " dimensions");
  return dims;
}

float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) bad(path, "cannot open (" + std::string(std::strerror(errno)) + ")");
  const auto end = f.tellg();
  if (end < 0) bad(path, "not a regular file (its size cannot be known)");
  const auto file_size = static_cast<uint64_t>(end);
  f.seekg(0);
  unsigned char pre[12] = {};
  const size_t got = f.read(reinterpret_cast<char*>(pre), 10) ? 10 : static_cast<size_t>(f.gcount());
  if (got < 10 || std::memcmp(pre, "\x93NUMPY", 6) != 0) bad(path, "not a .npy file (no \\x93NUMPY magic)");
  const int major = pre[6];
  uint64_t header_len, prefix;
  if (major == 1) {
    header_len = pre[8] | (static_cast<uint64_t>(pre[9]) << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (!f.read(reinterpret_cast<char*>(pre + 10), 2)) bad(path, "the .npy header length is cut off");
    header_len = pre[8] | (static_cast<uint64_t>(pre[9]) << 8) | (static_cast<uint64_t>(pre[10]) << 16) |
                 (static_cast<uint64_t>(pre[11]) << 24);
    prefix = 12;
  } else {
    bad(path, ".npy format version " + std::to_string(major) + " is not supported (1, 2 or 3)");
  }
  if (header_len > file_size - prefix || header_len > (1u << 20))
    bad(path, "the .npy header length " + std::to_string(header_len) + " runs past the end of the file");
  std::string h(header_len, '\0');
  if (!f.read(&h[0], static_cast<std::streamsize>(header_len))) bad(path, "the .npy header is cut off");

  NpyArray a;
  const std::string descr = dict_value(path, h, "descr");
  if (descr.size() != 3) bad(path, "unsupported .npy dtype '" + descr + "'");
  if (descr[0] == '>' && descr.substr(1) != "u1" && descr.substr(1) != "b1")
    bad(path, "big-endian .npy dtype '" + descr + "' is not supported; save it little-endian (astype('<" +
                  descr.substr(1) + "'))");
  if (descr[0] != '<' && descr[0] != '|' && descr[0] != '=' && descr[0] != '>')
    bad(path, "unsupported .npy dtype '" + descr + "'");
  for (const auto& d : kDescrs)
    if (descr.substr(1) == d.descr) a.dtype = d.dtype;
  if (a.dtype == SPORA_DTYPE_INVALID)
    bad(path, "unsupported .npy dtype '" + descr + "' (Spora takes f4, f8, f2, i4, i8, u1, b1)");
  const std::string fortran = dict_value(path, h, "fortran_order");
  if (fortran == "True")
    bad(path, "Fortran-order .npy arrays are not supported; save np.ascontiguousarray(x)");
  if (fortran != "False") bad(path, "the .npy header's fortran_order is '" + fortran + "', not True or False");
  const std::string shape = dict_value(path, h, "shape");
  if (shape.empty() || shape[0] != '(') bad(path, "the .npy shape '" + shape + "' is not a tuple");
  a.shape = parse_shape(path, shape);

  uint64_t bytes = spora_dtype_size(a.dtype);
  for (int64_t d : a.shape) {
    if (d != 0 && bytes > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))
      bad(path, "the .npy shape " + shape + " overflows");
    bytes *= static_cast<uint64_t>(d);
  }
  const uint64_t avail = file_size - prefix - header_len;
  if (bytes != avail)
    bad(path, "the .npy data is " + std::to_string(avail) + " bytes but shape " + shape + " of " + descr + " needs " +
                  std::to_string(bytes) + (avail < bytes ? " (truncated)" : " (trailing bytes)"));
  a.data.resize(bytes);
  if (bytes && !f.read(reinterpret_cast<char*>(a.data.data()), static_cast<std::streamsize>(bytes)))
    bad(path, "read error in the .npy data");
  if (a.dtype == SPORA_DTYPE_BOOL)
    for (unsigned char& c : a.data)
      if (c > 1) bad(path, "a bool .npy element is " + std::to_string(c) + ", not 0 or 1");
  return a;
}

void write_npy(const std::string& path, const NpyArray& in) {
  const NpyArray* a = &in;
  NpyArray conv;
  if (in.dtype == SPORA_DTYPE_BF16) {  // NumPy has no bf16
    conv.dtype = SPORA_DTYPE_F32;
    conv.shape = in.shape;
    conv.data.resize(in.data.size() * 2);
    for (size_t i = 0; i < in.data.size() / 2; ++i) {
      uint16_t h;
      std::memcpy(&h, &in.data[2 * i], 2);
      const float v = bf16_to_f32(h);
      std::memcpy(&conv.data[4 * i], &v, 4);
    }
    a = &conv;
  }
  const char* descr = nullptr;
  for (const auto& d : kDescrs)
    if (d.dtype == a->dtype) descr = d.descr;
  if (!descr) bad(path, std::string("cannot write dtype ") + spora_dtype_name(a->dtype) + " as .npy");
  std::string shape = "(";
  for (size_t i = 0; i < a->shape.size(); ++i) shape += std::to_string(a->shape[i]) + (a->shape.size() == 1 ? "," : i + 1 < a->shape.size() ? ", " : "");
  shape += ")";
  const char order = (a->dtype == SPORA_DTYPE_U8 || a->dtype == SPORA_DTYPE_BOOL) ? '|' : '<';
  std::string h = std::string("{'descr': '") + order + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so that the data starts on a 64-byte boundary; the
  // header ends in '\n'.
  const size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  if (h.size() > 65535) bad(path, "shape too long for a .npy header");
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) bad(path, "cannot create (" + std::string(std::strerror(errno)) + ")");
  const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(h.size() & 0xff),
                                 static_cast<unsigned char>(h.size() >> 8)};
  f.write(reinterpret_cast<const char*>(pre), 10);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  f.write(reinterpret_cast<const char*>(a->data.data()), static_cast<std::streamsize>(a->data.size()));
  if (!f.flush()) bad(path, "write error");
}

}  // namespace spora::cli
