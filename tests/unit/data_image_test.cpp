// JPEG/PNG decoding (data/image_decode.h): PNGs written here byte by byte
// (zlib for IDAT), JPEGs made with libjpeg's own compressor, then damaged.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if __has_include(<jpeglib.h>)
#include <cstdio>  // jpeglib.h needs FILE
#include <jpeglib.h>
#define SPORA_TEST_JPEG 1
#endif

#include "data/image_decode.h"
#include "support/error.h"

using namespace spora::data;

namespace {

std::string error_of(const std::vector<uint8_t>& b, const std::string& what) {
  try {
    decode_image(b.data(), b.size(), what);
  } catch (const spora::Error& e) {
    return e.what();
  }
  return "no error";
}

void put32(std::vector<uint8_t>& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

void chunk(std::vector<uint8_t>& png, const char* type, const std::vector<uint8_t>& data) {
  put32(png, static_cast<uint32_t>(data.size()));
  const size_t start = png.size();
  png.insert(png.end(), type, type + 4);
  png.insert(png.end(), data.begin(), data.end());
  put32(png, static_cast<uint32_t>(crc32(0, png.data() + start, static_cast<uInt>(png.size() - start))));
}

// An 8-bit PNG of colour type `ctype` (0 grey, 2 RGB) from rows of samples.
std::vector<uint8_t> make_png(uint32_t w, uint32_t h, uint8_t ctype, const std::vector<uint8_t>& samples) {
  std::vector<uint8_t> png{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> ihdr;
  put32(ihdr, w);
  put32(ihdr, h);
  ihdr.insert(ihdr.end(), {8, ctype, 0, 0, 0});
  chunk(png, "IHDR", ihdr);
  const size_t row = samples.size() / h;
  std::vector<uint8_t> raw;
  for (uint32_t r = 0; r < h; ++r) {
    raw.push_back(0);  // filter: none
    raw.insert(raw.end(), samples.begin() + r * row, samples.begin() + (r + 1) * row);
  }
  uLongf n = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> z(n);
  compress(z.data(), &n, raw.data(), static_cast<uLong>(raw.size()));
  z.resize(n);
  chunk(png, "IDAT", z);
  chunk(png, "IEND", {});
  return png;
}

}  // namespace

TEST(DataImage, PngRgbAndGreyDecodeExactly) {
  if (!can_decode_png()) GTEST_SKIP() << "built without libpng";
  std::vector<uint8_t> rgb(2 * 3 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(13 * i + 1);
  const Column c = decode_image(make_png(3, 2, 2, rgb).data(), make_png(3, 2, 2, rgb).size(), "a.png");
  EXPECT_EQ(c.dtype, SPORA_DTYPE_U8);
  EXPECT_EQ(c.shape, (std::vector<int64_t>{2, 3, 3}));
  EXPECT_EQ(c.bytes, rgb);
  const std::vector<uint8_t> grey{0, 50, 100, 250};
  const std::vector<uint8_t> png = make_png(2, 2, 0, grey);
  const Column g = decode_image(png.data(), png.size(), "g.png");
  ASSERT_EQ(g.shape, (std::vector<int64_t>{2, 2, 3}));
  for (int p = 0; p < 4; ++p)
    for (int k = 0; k < 3; ++k) EXPECT_EQ(g.bytes[p * 3 + k], grey[p]);
}

TEST(DataImage, DamagedPngNamesTheImage) {
  if (!can_decode_png()) GTEST_SKIP() << "built without libpng";
  std::vector<uint8_t> png = make_png(4, 4, 2, std::vector<uint8_t>(48, 7));
  std::vector<uint8_t> cut(png.begin(), png.begin() + static_cast<long>(png.size() - 20));
  EXPECT_NE(error_of(cut, "dir/cut.png").find("[dataset decode] dir/cut.png: corrupt PNG image"), std::string::npos)
      << error_of(cut, "dir/cut.png");
  png[40] ^= 0xFF;  // inside IDAT: the CRC no longer matches
  EXPECT_NE(error_of(png, "x.png").find("x.png: corrupt PNG image"), std::string::npos) << error_of(png, "x.png");
}

// A PNG's IDAT bytes bound its pixels (deflate stops at 1032:1): a small
// file claiming a huge image is refused before 768 MiB are allocated for it,
// while a real image compressed close to that ratio still decodes.
TEST(DataImage, PngTooShortForItsSizeIsRefusedBeforeAllocating) {
  if (!can_decode_png()) GTEST_SKIP() << "built without libpng";
  std::vector<uint8_t> png = make_png(4096, 1024, 0, std::vector<uint8_t>(4096 * 1024, 0));
  ASSERT_LT(png.size(), 4096u * 1024 / 900);  // the all-zero rows compress near deflate's limit
  const Column c = decode_image(png.data(), png.size(), "zeros.png");
  EXPECT_EQ(c.shape, (std::vector<int64_t>{1024, 4096, 3}));
  // The same data under a header claiming 16384x16384 (IHDR's CRC redone).
  for (int i = 0; i < 4; ++i) png[16 + i] = png[20 + i] = static_cast<uint8_t>(16384u >> (24 - 8 * i));
  const uLong crc = crc32(0, png.data() + 12, 17);
  for (int i = 0; i < 4; ++i) png[29 + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
  const std::string err = error_of(png, "big.png");
  EXPECT_NE(err.find("big.png: corrupt PNG image: "), std::string::npos) << err;
  EXPECT_NE(err.find("bytes of IDAT data cannot hold 16384x16384 pixels"), std::string::npos) << err;
}

// libpng allocates a chunk's claimed length before reading it: a chunk
// claiming more than the file holds is refused before libpng sees it (a
// 94-byte PNG whose iTXt claimed 2 GB cost 2 GB, found by fuzz_image).
TEST(DataImage, PngChunkLongerThanTheFileIsRefusedBeforeLibpng) {
  if (!can_decode_png()) GTEST_SKIP() << "built without libpng";
  std::vector<uint8_t> png = make_png(3, 2, 2, std::vector<uint8_t>(18, 9));
  png.resize(png.size() - 12);  // drop IEND
  put32(png, 0x78000000u);      // ~2 GB
  png.insert(png.end(), {'i', 'T', 'X', 't', 1, 2, 3});
  const std::string err = error_of(png, "t.png");
  EXPECT_NE(err.find("t.png: corrupt PNG image: chunk 'iTXt' at byte "), std::string::npos) << err;
  EXPECT_NE(err.find("claims 2013265920 bytes of data, 3 bytes follow its header (truncated?)"), std::string::npos)
      << err;
}

TEST(DataImage, OtherBytesAreNotImages) {
  const std::vector<uint8_t> text{'h', 'e', 'l', 'l', 'o'};
  EXPECT_NE(error_of(text, "t.txt").find("t.txt: not a JPEG or PNG image (first bytes 68 65 6c 6c 6f; 5 bytes)"),
            std::string::npos)
      << error_of(text, "t.txt");
  EXPECT_NE(error_of({}, "e").find("e: empty image data"), std::string::npos);
}

#ifdef SPORA_TEST_JPEG
namespace {
std::vector<uint8_t> make_jpeg(int w, int h, int comps, const std::vector<uint8_t>& pixels, bool arith = false,
                               int restart_rows = 0, bool progressive = false) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = comps;
  c.in_color_space = comps == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 100, TRUE);
  c.arith_code = arith ? TRUE : FALSE;
  c.restart_in_rows = restart_rows;
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW r = const_cast<uint8_t*>(pixels.data()) + c.next_scanline * w * comps;
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> b(out, out + size);
  jpeg_destroy_compress(&c);
  std::free(out);
  return b;
}
}  // namespace

TEST(DataImage, JpegDecodesCloseToTheSourceAndDamageIsAnError) {
  if (!can_decode_jpeg()) GTEST_SKIP() << "built without libjpeg";
  // A smooth gradient: quality 100 keeps every sample within a few levels.
  const int w = 16, h = 8;
  std::vector<uint8_t> px(w * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < 3; ++k) px[(y * w + x) * 3 + k] = static_cast<uint8_t>(40 + 8 * x + 4 * y + 30 * k);
  const std::vector<uint8_t> jpg = make_jpeg(w, h, 3, px);
  const Column c = decode_image(jpg.data(), jpg.size(), "a.jpg");
  ASSERT_EQ(c.shape, (std::vector<int64_t>{h, w, 3}));
  int worst = 0;
  for (size_t i = 0; i < px.size(); ++i) worst = std::max(worst, std::abs(int(c.bytes[i]) - int(px[i])));
  EXPECT_LE(worst, 4);
  // Grey JPEGs come out RGB.
  const std::vector<uint8_t> g = make_jpeg(8, 8, 1, std::vector<uint8_t>(64, 90));
  const Column gc = decode_image(g.data(), g.size(), "g.jpg");
  ASSERT_EQ(gc.shape, (std::vector<int64_t>{8, 8, 3}));
  EXPECT_LE(std::abs(int(gc.bytes[0]) - 90), 1);
  // Cut mid-scan: libjpeg would pad with grey and warn; here it is an error.
  const std::vector<uint8_t> cut(jpg.begin(), jpg.begin() + static_cast<long>(jpg.size() / 2));
  EXPECT_NE(error_of(cut, "cut.jpg").find("[dataset decode] cut.jpg: corrupt JPEG image"), std::string::npos)
      << error_of(cut, "cut.jpg");
  // A garbled header.
  std::vector<uint8_t> bad = jpg;
  for (size_t i = 3; i < 40 && i < bad.size(); ++i) bad[i] = 0xEE;
  EXPECT_NE(error_of(bad, "bad.jpg").find("bad.jpg: corrupt JPEG image"), std::string::npos) << error_of(bad, "bad.jpg");
}

// Arithmetic decoding meets the end of its data without a warning (it goes
// on with zeros): a truncated image ending in a marker must still be an
// error, early, while whole images (restart markers included) decode.
TEST(DataImage, ArithmeticJpegCutShortIsAnError) {
  if (!can_decode_jpeg()) GTEST_SKIP() << "built without libjpeg";
  const int w = 64, h = 256;
  std::vector<uint8_t> px(w * h * 3);
  uint32_t r = 1;
  for (auto& v : px) v = static_cast<uint8_t>((r = r * 1664525u + 1013904223u) >> 24);  // noise: data all along
  for (int restart : {0, 1}) {
    const std::vector<uint8_t> jpg = make_jpeg(w, h, 3, px, true, restart);
    const Column c = decode_image(jpg.data(), jpg.size(), "arith.jpg");
    ASSERT_EQ(c.shape, (std::vector<int64_t>{h, w, 3})) << "restart rows " << restart;
    std::vector<uint8_t> cut(jpg.begin(), jpg.begin() + static_cast<long>(jpg.size() / 2));
    if (cut.back() == 0xFF) cut.pop_back();
    cut.push_back(0xFF);
    cut.push_back(0xD9);  // EOI: libjpeg alone decodes this "cleanly", the rest of the rows zeros
    const std::string err = error_of(cut, "cut.jpg");
    EXPECT_NE(err.find("cut.jpg: corrupt JPEG image: the image data ends (marker 0xd9) at row "), std::string::npos)
        << "restart rows " << restart << ": " << err;
  }
  // Progressive: every scan is absorbed before the first output row, so the
  // end of a scan's data is caught as the scans are read (found by fuzz_image:
  // a 142-byte file claiming 4112x65280 pixels decoded into grey).
  const std::vector<uint8_t> prog = make_jpeg(w, h, 3, px, true, 0, true);
  const Column c = decode_image(prog.data(), prog.size(), "prog.jpg");
  ASSERT_EQ(c.shape, (std::vector<int64_t>{h, w, 3}));
  std::vector<uint8_t> cut(prog.begin(), prog.begin() + static_cast<long>(prog.size() / 2));
  if (cut.back() == 0xFF) cut.pop_back();
  cut.push_back(0xFF);
  cut.push_back(0xD9);
  const std::string err = error_of(cut, "prog.jpg");
  EXPECT_NE(err.find("prog.jpg: corrupt JPEG image: the data of a scan ends (marker 0xd9) at iMCU row "),
            std::string::npos)
      << err;
}
#endif
