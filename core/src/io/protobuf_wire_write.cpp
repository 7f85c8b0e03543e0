// pb::Writer: the protobuf wire encoding (varints, fixed 32/64-bit values,
// length-delimited fields) from the public encoding rules.
#include <cstring>

#include "io/protobuf_wire.h"

namespace spora::io::pb {

void Writer::raw_varint(uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out_.push_back(static_cast<char>(v));
}

void Writer::varint(uint32_t field, uint64_t v) {
  tag(field, kVarint);
  raw_varint(v);
}

void Writer::f32(uint32_t field, float v) {
  tag(field, kFixed32);
  char b[4];
  std::memcpy(b, &v, 4);  // little-endian hosts only (as the reader)
  out_.append(b, 4);
}

void Writer::f64(uint32_t field, double v) {
  tag(field, kFixed64);
  char b[8];
  std::memcpy(b, &v, 8);
  out_.append(b, 8);
}

void Writer::bytes(uint32_t field, const void* data, size_t n) {
  tag(field, kLen);
  raw_varint(n);
  if (n) out_.append(static_cast<const char*>(data), n);
}

void Writer::packed_ints(uint32_t field, const std::vector<int64_t>& v) {
  Writer run;
  for (int64_t x : v) run.raw_varint(static_cast<uint64_t>(x));
  bytes(field, run.out_.data(), run.out_.size());
}

void Writer::packed_floats(uint32_t field, const std::vector<float>& v) {
  bytes(field, v.data(), v.size() * sizeof(float));
}

}  // namespace spora::io::pb
