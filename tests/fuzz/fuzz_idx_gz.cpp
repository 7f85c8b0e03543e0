// IDX files, gzip (data/idx.h). Mutated gzip bytes mostly fail zlib's CRC
// before the IDX reader sees anything, so the input is the decompressed
// IDX content: it is gzipped here and read whole, then cut off part-way
// (a truncated download), and the raw input is read as a gzip file too.
#include <zlib.h>

#include <vector>

#include "data/idx.h"
#include "fuzz_util.h"

namespace {

std::vector<uint8_t> gzip(const uint8_t* data, size_t size) {
  z_stream z{};
  // windowBits 15 + 16: a gzip header and trailer, as `gzip` writes.
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::vector<uint8_t> out(deflateBound(&z, size) + 32);
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> gz = gzip(data, size);
  std::string path = spora::fuzz::as_file(gz.data(), gz.size());
  spora::fuzz::expect_clean("idx_gz", [&] { spora::data::read_idx(path); });
  path = spora::fuzz::as_file(gz.data(), gz.size() / 2 + (size % 7));
  spora::fuzz::expect_clean("idx_gz", [&] { spora::data::read_idx(path); });
  path = spora::fuzz::as_file(data, size);
  spora::fuzz::expect_clean("idx_gz", [&] { spora::data::read_idx(path); });
  return 0;
}
