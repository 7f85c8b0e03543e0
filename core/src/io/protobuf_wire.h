// A reader for the protocol-buffers wire format (the encoding, not .proto
// schemas), and a writer of it (ONNX export): tags, varints, fixed 32/64-bit values and length-delimited
// fields over a byte span that must outlive the reader. Written here from
// the public encoding rules, for ONNX files; every read is bounds-checked
// and any malformed byte sequence is an Error (kInvalidArgument) naming
// `what` (the file) and the byte offset, never a crash or an allocation
// sized by the file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spora::io::pb {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// A length-delimited payload: a view into the reader's buffer, and where it
// starts in the file (for messages).
struct Bytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t offset = 0;  // in the whole buffer
  std::string_view view() const { return {reinterpret_cast<const char*>(data), size}; }
};

class Reader {
 public:
  // `what` names the file in errors; `base` is the offset of `data` in it.
  Reader(const uint8_t* data, size_t size, const std::string* what, size_t base = 0)
      : p_(data), begin_(data), end_(data + size), what_(what), base_(base) {}
  Reader(const Bytes& b, const std::string* what) : Reader(b.data, b.size, what, b.offset) {}

  // Reads the next tag; false at the end of the message. Field number 0 and
  // wire types 3, 4, 6, 7 (groups are not used by the formats read here)
  // are errors.
  bool next();
  uint32_t field() const { return field_; }
  WireType wire() const { return wire_; }

  // The current field's value. Each checks the wire type and fails naming
  // `name` (the message and field) when it is wrong.
  uint64_t varint(const char* name);
  int64_t int64(const char* name) { return static_cast<int64_t>(varint(name)); }
  // An int32 field (negative values come as 10-byte varints); values out
  // of int32 range are errors.
  int32_t int32(const char* name);
  float f32(const char* name);
  double f64(const char* name);
  Bytes bytes(const char* name);
  // A string field; it must be valid UTF-8 (names end up in messages and
  // in the C API's strings).
  std::string string(const char* name);
  // A repeated scalar field, packed (one length-delimited run) or not (one
  // element per tag): appends to `out`. `max` bounds the total count.
  void ints(const char* name, std::vector<int64_t>& out, size_t max);
  void floats(const char* name, std::vector<float>& out, size_t max);
  void doubles(const char* name, std::vector<double>& out, size_t max);
  // Skips the current field's value (any wire type this reader accepts).
  void skip();

  size_t offset() const { return base_ + static_cast<size_t>(p_ - begin_); }
  [[noreturn]] void error(const std::string& msg) const;

 private:
  uint64_t raw_varint();
  void need(size_t n, const char* name);
  void expect(WireType w, const char* name);

  const uint8_t* p_;
  const uint8_t* begin_;
  const uint8_t* end_;
  const std::string* what_;
  size_t base_;
  uint32_t field_ = 0;
  WireType wire_ = kVarint;
};

// A writer of the same encoding, for ONNX export: fields are appended in
// the order called; a nested message is a Writer of its own, appended
// whole (its length first).
class Writer {
 public:
  void varint(uint32_t field, uint64_t v);
  void int64(uint32_t field, int64_t v) { varint(field, static_cast<uint64_t>(v)); }
  void f32(uint32_t field, float v);
  void f64(uint32_t field, double v);
  void bytes(uint32_t field, const void* data, size_t n);
  void string(uint32_t field, std::string_view s) { bytes(field, s.data(), s.size()); }
  void message(uint32_t field, const Writer& m) { bytes(field, m.data().data(), m.data().size()); }
  // Packed repeated scalars (one length-delimited run).
  void packed_ints(uint32_t field, const std::vector<int64_t>& v);
  void packed_floats(uint32_t field, const std::vector<float>& v);

  const std::string& data() const { return out_; }

 private:
  void tag(uint32_t field, WireType w) { raw_varint(static_cast<uint64_t>(field) << 3 | w); }
  void raw_varint(uint64_t v);

  std::string out_;
};

// `s` with bytes outside printable ASCII as \xNN: file bytes quoted in an
// error message stay printable and valid UTF-8.
std::string printable(std::string_view s);

}  // namespace spora::io::pb
