#include "io/protobuf_wire.h"

#include <cstring>
#include <limits>

#include "support/error.h"

namespace spora::io::pb {

void Reader::error(const std::string& msg) const {
  fail(Code::kInvalidArgument, "[onnx] '{}': {} (at byte {})", *what_, msg, offset());
}

uint64_t Reader::raw_varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p_ >= end_) error("a varint runs past the end of its message (truncated file?)");
    const uint8_t b = *p_++;
    // The tenth byte may only carry the top bit of a 64-bit value.
    if (shift == 63 && (b & 0xfe)) error("a varint is longer than 64 bits");
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  error("a varint is longer than 10 bytes");
}

bool Reader::next() {
  if (p_ >= end_) return false;
  const uint64_t tag = raw_varint();
  const uint64_t field = tag >> 3;
  const uint32_t wire = static_cast<uint32_t>(tag & 7);
  if (field == 0 || field > (1u << 29) - 1) error("field number " + std::to_string(field) + " is invalid");
  if (wire != kVarint && wire != kFixed64 && wire != kLen && wire != kFixed32)
    error("wire type " + std::to_string(wire) + " (field " + std::to_string(field) +
          ") is not valid here: not a protobuf message, or a damaged one");
  field_ = static_cast<uint32_t>(field);
  wire_ = static_cast<WireType>(wire);
  return true;
}

void Reader::need(size_t n, const char* name) {
  if (static_cast<size_t>(end_ - p_) < n)
    error(std::string(name) + ": " + std::to_string(n) + " bytes needed, " + std::to_string(end_ - p_) +
          " left in the enclosing message (truncated file or a length past the end)");
}

void Reader::expect(WireType w, const char* name) {
  if (wire_ != w)
    error(std::string(name) + " has wire type " + std::to_string(wire_) + ", expected " + std::to_string(w));
}

uint64_t Reader::varint(const char* name) {
  expect(kVarint, name);
  return raw_varint();
}

int32_t Reader::int32(const char* name) {
  const int64_t v = int64(name);
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
    error(std::string(name) + " = " + std::to_string(v) + " is out of int32 range");
  return static_cast<int32_t>(v);
}

float Reader::f32(const char* name) {
  expect(kFixed32, name);
  need(4, name);
  float f;
  std::memcpy(&f, p_, 4);  // little-endian hosts only (as the whole library)
  p_ += 4;
  return f;
}

double Reader::f64(const char* name) {
  expect(kFixed64, name);
  need(8, name);
  double d;
  std::memcpy(&d, p_, 8);
  p_ += 8;
  return d;
}

Bytes Reader::bytes(const char* name) {
  expect(kLen, name);
  const uint64_t n = raw_varint();
  if (n > static_cast<uint64_t>(end_ - p_)) need(static_cast<size_t>(std::min<uint64_t>(n, SIZE_MAX)), name);
  Bytes b{p_, static_cast<size_t>(n), offset()};
  p_ += n;
  return b;
}

namespace {
// Well-formed UTF-8 as RFC 3629 defines it (its table of byte ranges): no
// overlong forms, no surrogates (U+D800..DFFF), nothing past U+10FFFF, no
// truncated sequence. Overlong forms matter: they let a '/' or NUL hide
// from a later check of the decoded text.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n;  // continuation bytes
    unsigned char lo = 0x80, hi = 0xbf;  // the range of the first of them
    if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c == 0xe0) lo = 0xa0;  // below: overlong
      if (c == 0xed) hi = 0x9f;  // above: surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c == 0xf0) lo = 0x90;  // below: overlong
      if (c == 0xf4) hi = 0x8f;  // above: past U+10FFFF
    } else {
      return false;  // a continuation byte, C0/C1 (overlong) or F5..FF
    }
    if (s.size() - i <= n) return false;
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lo || c1 > hi) return false;
    for (size_t k = 2; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    i += n + 1;
  }
  return true;
}
}  // namespace

std::string Reader::string(const char* name) {
  const Bytes b = bytes(name);
  if (!valid_utf8(b.view())) error(std::string(name) + " '" + printable(b.view()) + "' is not valid UTF-8");
  return std::string(b.view());
}

std::string printable(std::string_view s) {
  std::string o;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      o += ch;
    } else {
      static const char* hex = "0123456789abcdef";
      o += "\\x";
      o += hex[c >> 4];
      o += hex[c & 15];
    }
  }
  return o;
}

void Reader::ints(const char* name, std::vector<int64_t>& out, size_t max) {
  if (wire_ == kLen) {
    Bytes b = bytes(name);
    Reader r(b, what_);
    while (r.p_ < r.end_) {
      if (out.size() >= max) error(std::string(name) + " has more than " + std::to_string(max) + " values");
      out.push_back(static_cast<int64_t>(r.raw_varint()));
    }
    return;
  }
  if (out.size() >= max) error(std::string(name) + " has more than " + std::to_string(max) + " values");
  out.push_back(int64(name));
}

namespace {
template <class T, WireType W>
void fixed_list(Reader& r, const Bytes& b, const char* name, std::vector<T>& out, size_t max) {
  if (b.size % sizeof(T))
    r.error(std::string(name) + ": packed length " + std::to_string(b.size) + " is not a multiple of " +
            std::to_string(sizeof(T)));
  const size_t n = b.size / sizeof(T);
  if (n > max || out.size() > max - n)
    r.error(std::string(name) + " has more than " + std::to_string(max) + " values");
  const size_t at = out.size();
  out.resize(at + n);
  if (n) std::memcpy(&out[at], b.data, b.size);
}
}  // namespace

void Reader::floats(const char* name, std::vector<float>& out, size_t max) {
  if (wire_ == kLen) return fixed_list<float, kFixed32>(*this, bytes(name), name, out, max);
  if (out.size() >= max) error(std::string(name) + " has more than " + std::to_string(max) + " values");
  out.push_back(f32(name));
}

void Reader::doubles(const char* name, std::vector<double>& out, size_t max) {
  if (wire_ == kLen) return fixed_list<double, kFixed64>(*this, bytes(name), name, out, max);
  if (out.size() >= max) error(std::string(name) + " has more than " + std::to_string(max) + " values");
  out.push_back(f64(name));
}

void Reader::skip() {
  switch (wire_) {
    case kVarint: raw_varint(); break;
    case kFixed64: need(8, "a skipped field"); p_ += 8; break;
    case kFixed32: need(4, "a skipped field"); p_ += 4; break;
    case kLen: bytes("a skipped field"); break;
    default: error("cannot skip wire type " + std::to_string(wire_));
  }
}

}  // namespace spora::io::pb
