// JPEG (libjpeg-turbo) and PNG (libpng's simplified API) decoding.
//
// libjpeg reports errors through a callback that must not return: it
// longjmps back to decode_jpeg's setjmp, which only owns trivially
// destructible state until the decode has finished, and the C++ error is
// raised after the jump. Corrupt-data warnings (a truncated file libjpeg
// would pad with grey) count as errors: a damaged image must not train
// silently.
#include "data/image_decode.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "support/error.h"

#ifdef SPORA_HAVE_JPEG
#include <jpeglib.h>
#endif
#ifdef SPORA_HAVE_PNG
#include <png.h>
#endif

namespace spora::data {
namespace {

constexpr uint64_t kMaxPixels = uint64_t{1} << 28;

bool is_jpeg(const uint8_t* p, size_t n) { return n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF; }
bool is_png(const uint8_t* p, size_t n) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return n >= 8 && std::memcmp(p, sig, 8) == 0;
}

[[maybe_unused]] void check_size(uint64_t w, uint64_t h, const std::string& what, const char* fmt_name) {
  if (w == 0 || h == 0 || w * h > kMaxPixels)
    fail(Code::kInvalidArgument, "[dataset decode] {}: {} image of {}x{} pixels (1 to 2^28 supported)", what,
         fmt_name, w, h);
}

#ifdef SPORA_HAVE_JPEG
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegError*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

void jpeg_on_message(j_common_ptr c, int level) {
  if (level < 0) jpeg_on_error(c);  // a corrupt-data warning
}

// Called by libjpeg after each iMCU row it decodes, in every scan (for a
// multi-scan image all of them are absorbed inside jpeg_start_decompress,
// before any output row). The entropy decoder having met a marker other than
// a restart while rows of its scan are still to come means the scan's data
// ended early. Huffman decoding warns there (an error, above); arithmetic
// decoding goes on with zeros and no warning, so a 142-byte progressive
// arithmetic file claiming 4112x65280 pixels decoded into 805 MB of grey in
// 3.3 s (found by fuzz_image). The decoder may read up to a few iMCU rows
// ahead of its position, hence the margin of three.
void jpeg_on_progress(j_common_ptr c) {
  if (!c->is_decompressor) return;
  auto* d = reinterpret_cast<j_decompress_ptr>(c);
  const int m = d->unread_marker;
  if (m != 0 && !(m >= 0xD0 && m <= 0xD7) && d->input_iMCU_row + 3 < d->total_iMCU_rows) {
    auto* e = reinterpret_cast<JpegError*>(c->err);
    std::snprintf(e->message, sizeof e->message, "the data of a scan ends (marker 0x%02x) at iMCU row %u of %u", m,
                  d->input_iMCU_row, d->total_iMCU_rows);
    std::longjmp(e->jump, 1);
  }
}

Column decode_jpeg(const uint8_t* data, size_t size, const std::string& what) {
  jpeg_decompress_struct info;
  JpegError err;
  err.message[0] = '\0';
  info.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_on_error;
  err.mgr.emit_message = jpeg_on_message;
  jpeg_progress_mgr progress{};
  progress.progress_monitor = jpeg_on_progress;
  // volatile: read after a longjmp that may follow its assignment.
  uint8_t* volatile pixels = nullptr;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&info);
    std::free(pixels);
    fail(Code::kInvalidArgument, "[dataset decode] {}: corrupt JPEG image: {}", what, err.message);
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, data, static_cast<unsigned long>(size));
  jpeg_read_header(&info, TRUE);
  if (jpeg_has_multiple_scans(&info)) info.progress = &progress;  // one scan: checked per output row below
  if (info.image_width == 0 || info.image_height == 0 ||
      uint64_t{info.image_width} * info.image_height > kMaxPixels) {
    std::snprintf(err.message, sizeof err.message, "%ux%u pixels (1 to 2^28 supported)", info.image_width,
                  info.image_height);
    std::longjmp(err.jump, 1);
  }
  info.out_color_space = JCS_RGB;  // grey is expanded; CMYK is refused by libjpeg
  jpeg_start_decompress(&info);
  const size_t row = size_t{info.output_width} * 3;
  pixels = static_cast<uint8_t*>(std::malloc(row * info.output_height));
  if (!pixels) {
    std::snprintf(err.message, sizeof err.message, "out of memory");
    std::longjmp(err.jump, 1);
  }
  // A single-scan image whose entropy decoder has met a marker other than a
  // restart (the end of its data) while rows are still to come is cut short.
  // Huffman decoding warns there; arithmetic decoding goes on with zeros and
  // no warning, so a 519-byte file claiming 2064x57600 pixels decoded in
  // full (0.8 s, 350 MB; found by fuzz_image), and a truncated one ending in
  // EOI decoded "cleanly". The decoder may run up to two iMCU rows ahead of
  // the output (context rows for upsampling), hence the margin of three.
  const bool one_scan = !jpeg_has_multiple_scans(&info);
  const JDIMENSION margin = 3 * static_cast<JDIMENSION>(info.max_v_samp_factor) * DCTSIZE;
  while (info.output_scanline < info.output_height) {
    JSAMPROW r = static_cast<uint8_t*>(pixels) + row * info.output_scanline;
    jpeg_read_scanlines(&info, &r, 1);
    const int m = info.unread_marker;
    if (one_scan && m != 0 && !(m >= 0xD0 && m <= 0xD7) && info.output_height - info.output_scanline > margin) {
      std::snprintf(err.message, sizeof err.message, "the image data ends (marker 0x%02x) at row %u of %u", m,
                    info.output_scanline, info.output_height);
      std::longjmp(err.jump, 1);
    }
  }
  jpeg_finish_decompress(&info);
  const int64_t h = info.output_height, w = info.output_width;
  jpeg_destroy_decompress(&info);
  Column out = make_column(SPORA_DTYPE_U8, {h, w, 3});
  std::memcpy(out.bytes.data(), pixels, out.bytes.size());
  std::free(pixels);
  return out;
}
#endif

#ifdef SPORA_HAVE_PNG
uint32_t be32(const uint8_t* p) { return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3]; }

// A chunk type for a message: its four bytes, '?' for any that is not a letter.
std::string printable_tag(const char* t) {
  std::string s(t, 4);
  for (char& c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) c = '?';
  return s;
}

// The chunks up to IEND, walked before libpng sees the file: one that claims
// more bytes than the file has left is refused here, because libpng
// allocates a chunk's claimed length before reading it (a 94-byte PNG whose
// iTXt chunk claimed 2 GB cost 2 GB and 1.7 s before "read beyond end of
// data", found by fuzz_image). Returns the bytes of IDAT data.
uint64_t check_png_chunks(const uint8_t* data, size_t size, const std::string& what) {
  uint64_t idat = 0;
  size_t at = 8;
  while (at + 8 <= size) {
    const uint64_t len = be32(data + at);
    const char* type = reinterpret_cast<const char*>(data + at + 4);
    const size_t left = size - at - 8;  // after the length and type; the data and a 4-byte CRC must fit
    if (len + 4 > left)
      fail(Code::kInvalidArgument,
           "[dataset decode] {}: corrupt PNG image: chunk '{}' at byte {} claims {} bytes of data, {} bytes follow "
           "its header (truncated?)", what, printable_tag(type), at, len, left);
    if (std::memcmp(type, "IDAT", 4) == 0) idat += len;
    if (std::memcmp(type, "IEND", 4) == 0) break;
    at += 12 + static_cast<size_t>(len);
  }
  return idat;
}

// Refuses, before the output is allocated, a PNG whose IDAT chunks are too
// short to hold its claimed pixels even at deflate's best ratio (1032:1):
// otherwise a 100-byte file claiming 16384x16384 pixels costs a zeroed
// 768 MiB buffer before libpng finds the data missing (seen while writing
// fuzz_image: 0.8 s and 900 MB of RSS per such input).
// Only filter bytes and row padding are left out of the count, so the bound
// stays below what any valid image holds.
void check_png_data_size(const uint8_t* data, uint64_t idat, const png_image& img, const std::string& what) {
  // IHDR is the first chunk (libpng has checked it): bit depth and colour type.
  const unsigned depth = data[24], ctype = data[25];
  const unsigned channels = ctype == 2 ? 3 : ctype == 4 ? 2 : ctype == 6 ? 4 : 1;
  const uint64_t pixel_bytes = (uint64_t{img.width} * img.height * depth * channels) / 8;
  if (pixel_bytes / 1032 > idat + 64)
    fail(Code::kInvalidArgument,
         "[dataset decode] {}: corrupt PNG image: {} bytes of IDAT data cannot hold {}x{} pixels (truncated?)", what,
         idat, img.width, img.height);
}

Column decode_png(const uint8_t* data, size_t size, const std::string& what) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  const uint64_t idat = check_png_chunks(data, size, what);
  if (!png_image_begin_read_from_memory(&img, data, size))
    fail(Code::kInvalidArgument, "[dataset decode] {}: corrupt PNG image: {}", what, img.message);
  img.format = PNG_FORMAT_RGB;
  if (uint64_t{img.width} * img.height > kMaxPixels || img.width == 0 || img.height == 0) {
    png_image_free(&img);
    check_size(img.width, img.height, what, "PNG");
  }
  try {
    check_png_data_size(data, idat, img, what);
  } catch (...) {
    png_image_free(&img);
    throw;
  }
  Column out = make_column(SPORA_DTYPE_U8, {static_cast<int64_t>(img.height), static_cast<int64_t>(img.width), 3});
  // Alpha is composited onto black, as dropping the channel of a
  // premultiplied-looking image would show garbage in transparent areas.
  const png_color black{0, 0, 0};
  if (!png_image_finish_read(&img, &black, out.bytes.data(), 0, nullptr)) {
    const std::string msg = img.message;
    png_image_free(&img);
    fail(Code::kInvalidArgument, "[dataset decode] {}: corrupt PNG image: {}", what, msg);
  }
  return out;
}
#endif

}  // namespace

bool can_decode_jpeg() {
#ifdef SPORA_HAVE_JPEG
  return true;
#else
  return false;
#endif
}

bool can_decode_png() {
#ifdef SPORA_HAVE_PNG
  return true;
#else
  return false;
#endif
}

Column decode_image(const uint8_t* data, size_t size, const std::string& what) {
  if (!data || size == 0) fail(Code::kInvalidArgument, "[dataset decode] {}: empty image data", what);
  if (is_jpeg(data, size)) {
#ifdef SPORA_HAVE_JPEG
    return decode_jpeg(data, size, what);
#else
    fail(Code::kUnimplemented, "[dataset decode] {}: this Spora was built without libjpeg (install libjpeg62-turbo-dev "
         "and rebuild)", what);
#endif
  }
  if (is_png(data, size)) {
#ifdef SPORA_HAVE_PNG
    return decode_png(data, size, what);
#else
    fail(Code::kUnimplemented, "[dataset decode] {}: this Spora was built without libpng (install libpng-dev and "
         "rebuild)", what);
#endif
  }
  char head[3 * 8 + 1] = {0};
  for (size_t i = 0; i < size && i < 8; ++i) std::snprintf(head + 3 * i, 4, "%02x ", data[i]);
  fail(Code::kInvalidArgument, "[dataset decode] {}: not a JPEG or PNG image (first bytes {}; {} bytes)", what,
       std::string(head, size < 8 ? 3 * size - (size ? 1 : 0) : 23), size);
}

}  // namespace spora::data
