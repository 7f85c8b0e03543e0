#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include "support/error.h"

namespace spora::data {
namespace {

// An honest IDX file of a real dataset is far below this; the cap keeps a
// corrupted header from asking for a huge allocation before the size check.
constexpr uint64_t kMaxElements = uint64_t{1} << 34;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// zlib's gz* functions read plain files transparently, so one path serves
// both "x-idx3-ubyte" and "x-idx3-ubyte.gz".
class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path), f_(gzopen(path.c_str(), "rb")) {
    if (!f_) fail(Code::kIo, "[dataset] {}: cannot open: {}", path, std::strerror(errno));
    gzbuffer(f_.get(), 1 << 17);
  }
  // Reads up to n bytes; returns how many arrived (short only at the end).
  size_t read(void* dst, size_t n) {
    size_t got = 0;
    auto* p = static_cast<uint8_t*>(dst);
    while (got < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30));
      const int r = gzread(f_.get(), p + got, chunk);
      if (r < 0) {
        int err = 0;
        const char* msg = gzerror(f_.get(), &err);
        fail(Code::kInvalidArgument, "[dataset] {}: corrupt gzip stream: {}", path_, msg ? msg : "?");
      }
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  }
  // A cut-off gzip stream reads short without a gzread error; zlib reports
  // it through gzerror as Z_BUF_ERROR ("unexpected end of file").
  bool stream_cut() {
    int err = Z_OK;
    gzerror(f_.get(), &err);
    return err == Z_BUF_ERROR;
  }

 private:
  std::string path_;
  std::unique_ptr<gzFile_s, GzCloser> f_;
};

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

Column read_idx(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    fail(Code::kNotFound, "[dataset] {}: no such file", path);
  if (std::filesystem::is_directory(path, ec))
    fail(Code::kInvalidArgument, "[dataset] {}: is a directory, not an IDX file", path);
  Reader r(path);
  uint8_t head[4];
  if (r.read(head, 4) < 4 || head[0] != 0 || head[1] != 0)
    fail(Code::kInvalidArgument, "[dataset] {}: not an IDX file (bad magic number)", path);
  const uint8_t code = head[2], ndim = head[3];
  size_t in_size = 0;
  DType out = SPORA_DTYPE_INVALID;
  switch (code) {
    case 0x08: in_size = 1; out = SPORA_DTYPE_U8; break;
    case 0x09: in_size = 1; out = SPORA_DTYPE_I32; break;
    case 0x0B: in_size = 2; out = SPORA_DTYPE_I32; break;
    case 0x0C: in_size = 4; out = SPORA_DTYPE_I32; break;
    case 0x0D: in_size = 4; out = SPORA_DTYPE_F32; break;
    case 0x0E: in_size = 8; out = SPORA_DTYPE_F64; break;
    default: fail(Code::kInvalidArgument, "[dataset] {}: unknown IDX type code 0x{:02x}", path, code);
  }
  if (ndim == 0 || ndim > SPORA_MAX_NDIM)
    fail(Code::kInvalidArgument, "[dataset] {}: IDX header has {} dimensions (1..{} supported)", path, ndim,
         SPORA_MAX_NDIM);
  uint8_t dims_raw[4 * SPORA_MAX_NDIM];
  if (r.read(dims_raw, 4u * ndim) < 4u * ndim) fail(Code::kInvalidArgument, "[dataset] {}: IDX header is truncated", path);
  std::vector<int64_t> shape;
  // The product of the non-zero dimensions is capped too: a zero makes the
  // file empty, but the shape still travels (Column::numel multiplies all
  // of them, and must not overflow).
  uint64_t nonzero = 1;
  bool empty = false;
  for (int i = 0; i < ndim; ++i) {
    const uint32_t d = be32(dims_raw + 4 * i);
    shape.push_back(d);
    if (d == 0) empty = true;
    else nonzero = nonzero > kMaxElements / d ? kMaxElements + 1 : nonzero * d;
  }
  if (nonzero > kMaxElements)
    fail(Code::kInvalidArgument, "[dataset] {}: IDX header dimensions {} multiply to more than 2^34 elements{}", path,
         shape_str(shape), empty ? " (the zero aside)" : "");
  const uint64_t count = empty ? 0 : nonzero;
  // Read in steps, growing the buffer as data arrives: the header alone must
  // not decide an allocation (a 20-byte file may claim 2^34 elements). Steps
  // double from 1 MiB up to 64 MiB, so the buffer is never much more than
  // twice what the file holds.
  const size_t want = static_cast<size_t>(count) * in_size;
  std::vector<uint8_t> raw;
  size_t got = 0;
  while (got < want) {
    const size_t step = std::min<size_t>(want - got, std::clamp<size_t>(got, size_t{1} << 20, size_t{64} << 20));
    raw.resize(got + step);
    const size_t n = r.read(raw.data() + got, step);
    got += n;
    if (n < step) break;
  }
  if (got < want)
    fail(Code::kInvalidArgument, "[dataset] {}: truncated: header {} promises {} data bytes, file has {}{}", path,
         shape_str(shape), want, got, r.stream_cut() ? " (gzip stream cut off)" : "");
  uint8_t extra;
  if (r.read(&extra, 1) != 0)
    fail(Code::kInvalidArgument, "[dataset] {}: {} bytes of data expected after the header, the file has more",
         path, raw.size());

  Column c = make_column(out, shape);
  const size_t n = static_cast<size_t>(count);
  switch (code) {
    case 0x08:
      if (n) std::memcpy(c.bytes.data(), raw.data(), n);  // an empty file has no buffers (null pointers)
      break;
    case 0x09:
      for (size_t i = 0; i < n; ++i) c.as<int32_t>()[i] = static_cast<int8_t>(raw[i]);
      break;
    case 0x0B:
      for (size_t i = 0; i < n; ++i)
        c.as<int32_t>()[i] = static_cast<int16_t>(static_cast<uint16_t>((raw[2 * i] << 8) | raw[2 * i + 1]));
      break;
    case 0x0C:
      for (size_t i = 0; i < n; ++i) c.as<int32_t>()[i] = static_cast<int32_t>(be32(&raw[4 * i]));
      break;
    case 0x0D:
      for (size_t i = 0; i < n; ++i) {
        const uint32_t w = be32(&raw[4 * i]);
        std::memcpy(&c.as<float>()[i], &w, 4);
      }
      break;
    case 0x0E:
      for (size_t i = 0; i < n; ++i) {
        const uint64_t w = (uint64_t{be32(&raw[8 * i])} << 32) | be32(&raw[8 * i + 4]);
        std::memcpy(&c.as<double>()[i], &w, 8);
      }
      break;
  }
  return c;
}

}  // namespace spora::data
