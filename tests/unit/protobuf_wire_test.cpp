// The protobuf wire reader's string fields (io/protobuf_wire.h): UTF-8 is
// checked as RFC 3629 defines it, so overlong forms, surrogates, code points
// past U+10FFFF and truncated sequences are errors naming the field.
#include <gtest/gtest.h>

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
