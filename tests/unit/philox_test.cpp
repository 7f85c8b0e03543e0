// sdk/include/spora/sdk/philox.h against Random123's published known-answer
// vectors for Philox-4x32-10, and the stream layout random ops rely on.
#include <spora/sdk/philox.h>

#include <gtest/gtest.h>

namespace {

using spora::plugin::philox4x32_10;
using spora::plugin::PhiloxBlock;
using spora::plugin::PhiloxStream;

void expect_block(const PhiloxBlock& got, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  EXPECT_EQ(got.v[0], a);
  EXPECT_EQ(got.v[1], b);
  EXPECT_EQ(got.v[2], c);
  EXPECT_EQ(got.v[3], d);
}

TEST(Philox, KnownAnswerVectors) {
  expect_block(philox4x32_10({{0, 0, 0, 0}}, 0, 0), 0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u);
  expect_block(philox4x32_10({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu),
               0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu);
  expect_block(philox4x32_10({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u),
               0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u);
}

TEST(Philox, StreamLayout) {
  // Block b of (seed, offset) is philox(counter = (b, offset), key = seed),
  // each 64-bit value split low word first.
  const uint64_t seed = 0x299f31d0a4093822ull, offset = 0x0370734413198a2eull, b = 0x85a308d3243f6a88ull;
  expect_block(PhiloxStream(seed, offset).block(b), 0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u);
  expect_block(PhiloxStream(~0ull, ~0ull).block(~0ull), 0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu);
}

TEST(Philox, UniformMappings) {
  using namespace spora::plugin;
  EXPECT_EQ(uniform24(0), 0.0);
  EXPECT_LT(uniform24(0xffffffffu), 1.0);
  EXPECT_EQ(uniform24_open0(0xffffffffu), 1.0);
  EXPECT_GT(uniform24_open0(0), 0.0);
  EXPECT_GT(uniform24_mid(0), 0.0);
  EXPECT_LT(uniform24_mid(0xffffffffu), 1.0);
  EXPECT_EQ(uniform53(0, 0), 0.0);
  EXPECT_LT(uniform53(0xffffffffu, 0xffffffffu), 1.0);
  EXPECT_EQ(uniform53_open0(0xffffffffu, 0xffffffffu), 1.0);
  EXPECT_GT(uniform53_mid(0, 0), 0.0);
  EXPECT_LT(uniform53_mid(0xffffffffu, 0xffffffffu), 1.0);
  EXPECT_EQ(uniform24_mid(0xffffffffu) + uniform24_mid(0), 1.0);  // symmetric
  EXPECT_EQ(uniform53_mid(0xffffffffu, 0xffffffffu) + uniform53_mid(0, 0), 1.0);
}

}  // namespace
