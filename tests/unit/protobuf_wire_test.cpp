// The protobuf wire reader's string fields (io/protobuf_wire.h): UTF-8 is
// checked as RFC 3629 defines it, so overlong forms, surrogates, code points
// past U+10FFFF and truncated sequences are errors naming the field. The
// writer (ONNX export) is checked against the reader.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/protobuf_wire.h"
#include "support/error.h"

namespace spora {
namespace {

// Reads `text` as field 1 (length-delimited) of a one-field message; returns
// the error message, or "" when the string was accepted (and then checks it
// came back unchanged).
std::string read_string(const std::string& text) {
  std::vector<uint8_t> msg = {0x0a, static_cast<uint8_t>(text.size())};
  msg.insert(msg.end(), text.begin(), text.end());
  const std::string what = "test.onnx";
  io::pb::Reader r(msg.data(), msg.size(), &what);
  EXPECT_TRUE(r.next());
  try {
    EXPECT_EQ(r.string("NodeProto.name"), text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_rejected(const std::string& text, const char* why) {
  const std::string err = read_string(text);
  EXPECT_NE(err.find("NodeProto.name"), std::string::npos) << why << ": " << err;
  EXPECT_NE(err.find("is not valid UTF-8"), std::string::npos) << why << ": " << err;
}

TEST(ProtobufWireUtf8, ValidTextIsAccepted) {
  for (const std::string& s : {
           std::string(""), std::string("conv1/weight"), std::string("\x7f"),
           std::string("\xc2\x80"),          // U+0080, the first 2-byte form
           std::string("\xc3\xa9t\xc3\xa9"),  // été
           std::string("\xdf\xbf"),          // U+07FF
           std::string("\xe0\xa0\x80"),      // U+0800, the first 3-byte form
           std::string("\xe2\x82\xac"),      // €
           std::string("\xed\x9f\xbf"),      // U+D7FF, just below the surrogates
           std::string("\xee\x80\x80"),      // U+E000, just above them
           std::string("\xef\xbf\xbf"),      // U+FFFF
           std::string("\xf0\x90\x80\x80"),  // U+10000, the first 4-byte form
           std::string("\xf0\x9f\x98\x80"),  // an emoji
           std::string("\xf4\x8f\xbf\xbf"),  // U+10FFFF, the last code point
       })
    EXPECT_EQ(read_string(s), "") << io::pb::printable(s);
}

TEST(ProtobufWireUtf8, OverlongFormsAreRejected) {
  expect_rejected("\xc0\xaf", "'/' in two bytes");
  expect_rejected("\xc0\x80", "NUL in two bytes");
  expect_rejected("\xc1\xbf", "U+007F in two bytes");
  expect_rejected("\xe0\x80\xaf", "'/' in three bytes");
  expect_rejected("\xe0\x9f\xbf", "U+07FF in three bytes");
  expect_rejected("\xf0\x80\x80\xaf", "'/' in four bytes");
  expect_rejected("\xf0\x8f\xbf\xbf", "U+FFFF in four bytes");
}

TEST(ProtobufWireUtf8, SurrogatesAreRejected) {
  expect_rejected("\xed\xa0\x80", "U+D800");
  expect_rejected("\xed\xaf\xbf", "U+DBFF");
  expect_rejected("\xed\xb0\x80", "U+DC00");
  expect_rejected("\xed\xbf\xbf", "U+DFFF");
  expect_rejected("\xed\xa0\xbd\xed\xb8\x80", "a CESU-8 surrogate pair");
}

TEST(ProtobufWireUtf8, PastU10FFFFIsRejected) {
  expect_rejected("\xf4\x90\x80\x80", "U+110000");
  expect_rejected("\xf5\x80\x80\x80", "lead byte F5");
  expect_rejected("\xf7\xbf\xbf\xbf", "U+1FFFFF");
  expect_rejected("\xf8\x88\x80\x80\x80", "a 5-byte form");
  expect_rejected("\xfc\x84\x80\x80\x80\x80", "a 6-byte form");
  expect_rejected("\xfe", "byte FE");
  expect_rejected("\xff", "byte FF");
}

TEST(ProtobufWireUtf8, BrokenSequencesAreRejected) {
  expect_rejected("\x80", "a lone continuation byte");
  expect_rejected("a\xbf", "a continuation byte after ASCII");
  expect_rejected("\xc3", "a 2-byte form cut short");
  expect_rejected("\xe2\x82", "a 3-byte form cut short");
  expect_rejected("\xf0\x9f\x98", "a 4-byte form cut short");
  expect_rejected("\xe2\x82" "a", "ASCII where a continuation byte belongs");
  expect_rejected("\xf0\x9f\x98\xc3\xa9", "a lead byte where a continuation byte belongs");
  expect_rejected(std::string("ok\xc3\xa9\xe2\x82"), "valid text, then a sequence cut short");
}

}  // namespace
}  // namespace spora

namespace spora {
namespace {

// What pb::Writer encodes, the reader decodes back: varints (negative
// int64s take 10 bytes), fixed32/64, strings, nested messages and packed
// runs.
TEST(ProtobufWireWriter, RoundTripsThroughTheReader) {
  io::pb::Writer inner;
  inner.packed_ints(1, {0, 1, 300, -2, INT64_MAX});
  inner.packed_floats(2, {1.5f, -0.25f});
  io::pb::Writer w;
  w.int64(1, -7);
  w.varint(2, 150);
  w.f32(3, 3.25f);
  w.f64(4, -1e300);
  w.string(5, "conv1.weight");
  w.message(6, inner);
  const std::string& b = w.data();
  EXPECT_EQ(static_cast<uint8_t>(b[0]), 0x08);  // field 1, varint
  const std::string what = "written.onnx";
  io::pb::Reader r(reinterpret_cast<const uint8_t*>(b.data()), b.size(), &what);
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.int64("f1"), -7);
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.varint("f2"), 150u);
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.f32("f3"), 3.25f);
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.f64("f4"), -1e300);
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.string("f5"), "conv1.weight");
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.field(), 6u);
  io::pb::Reader m(r.bytes("f6"), &what);
  std::vector<int64_t> ints;
  std::vector<float> floats;
  ASSERT_TRUE(m.next());
  m.ints("ints", ints, 16);
  ASSERT_TRUE(m.next());
  m.floats("floats", floats, 16);
  EXPECT_FALSE(m.next());
  EXPECT_EQ(ints, (std::vector<int64_t>{0, 1, 300, -2, INT64_MAX}));
  EXPECT_EQ(floats, (std::vector<float>{1.5f, -0.25f}));
  EXPECT_FALSE(r.next());
}

}  // namespace
}  // namespace spora
