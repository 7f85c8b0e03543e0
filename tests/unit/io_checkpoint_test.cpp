// Checkpoint files: CRC-32C, round trips of every dtype on every device,
// the safetensors layout, hostile files, atomic commit, the C API.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "io/checkpoint.h"
#include "io/crc32c.h"
#include "io_test_util.h"
#include "support/error.h"

namespace spora {
namespace {

using iotest::TempDir;
using json = nlohmann::json;

Shape S(std::initializer_list<int64_t> d) {
  std::vector<int64_t> v(d);
  return Shape::from(v.data(), static_cast<int32_t>(v.size()), "test");
}

// Random bytes valid for the dtype (bool is 0 or 1).
std::vector<uint8_t> random_bytes(DType dt, const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(static_cast<size_t>(s.numel()) * dtype_size(dt));
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  if (dt == SPORA_DTYPE_BOOL)
    for (auto& x : b) x &= 1;
  return b;
}

std::vector<uint8_t> host_bytes(const Tensor& t) {
  std::vector<uint8_t> b(t.nbytes());
  tensor_read(t, b.data(), b.size());
  return b;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string open_error(const std::string& path) {
  return error_of([&] { io::Checkpoint c(path); });
}

constexpr DType kAllDtypes[] = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16,
                                SPORA_DTYPE_I32, SPORA_DTYPE_I64, SPORA_DTYPE_U8,  SPORA_DTYPE_BOOL};

// ---- CRC-32C ----

TEST(Crc32c, KnownVectors) {
  // The check value of the CRC-32C definition, and RFC 3720 (iSCSI) B.4.
  EXPECT_EQ(io::crc32c("123456789", 9), 0xE3069283u);
  std::vector<uint8_t> b(32, 0);
  EXPECT_EQ(io::crc32c(b.data(), b.size()), 0x8A9136AAu);
  std::fill(b.begin(), b.end(), 0xff);
  EXPECT_EQ(io::crc32c(b.data(), b.size()), 0x62A8AB43u);
  for (size_t i = 0; i < 32; ++i) b[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(io::crc32c(b.data(), b.size()), 0x46DD794Eu);
  for (size_t i = 0; i < 32; ++i) b[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(io::crc32c(b.data(), b.size()), 0x113FDB5Cu);
  EXPECT_EQ(io::crc32c(nullptr, 0), 0u);
}

TEST(Crc32c, TableAndHardwareAgreeAndChain) {
  std::mt19937 rng(7);
  std::vector<uint8_t> b(4099);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  // Every start alignment and many lengths, including the tails.
  for (size_t off = 0; off < 9; ++off)
    for (size_t n : {0, 1, 7, 8, 9, 15, 16, 63, 64, 65, 1000, 4090}) {
      const uint32_t t = io::crc32c_table(b.data() + off, n, 0);
      EXPECT_EQ(io::crc32c(b.data() + off, n), t) << off << " " << n;
      if (io::crc32c_hw_available()) {
        EXPECT_EQ(io::crc32c_hw(b.data() + off, n, 0), t) << off << " " << n;
      }
    }
  const uint32_t whole = io::crc32c(b.data(), b.size());
  EXPECT_EQ(io::crc32c(b.data() + 1000, b.size() - 1000, io::crc32c(b.data(), 1000)), whole);
}

// ---- round trips ----

class CheckpointRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(CheckpointRoundTrip, EveryDtypeZeroSizeAndScalars) {
  Device* dev = iotest::device(GetParam());
  TempDir dir;
  std::vector<std::string> names;
  std::vector<Tensor> tensors;
  std::vector<std::vector<uint8_t>> want;
  uint32_t seed = 1;
  for (DType dt : kAllDtypes)
    for (const Shape& s : {S({3, 5}), S({}), S({0, 4}), S({2, 1, 3, 1, 2})}) {
      names.push_back(std::string(dtype_name(dt)) + "/" + s.str());
      want.push_back(random_bytes(dt, s, seed++));
      tensors.push_back(tensor_from_host(dev, dt, s, want.back().data(), want.back().size()));
    }
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : tensors) ptrs.push_back(&t);
  const std::string path = dir.file("all.ckpt");
  io::save_checkpoint(path, names, ptrs, {{"epoch", "3"}, {"note", "caf\xc3\xa9 \"quoted\"\n"}});

  io::Checkpoint ckpt(path);
  ASSERT_EQ(ckpt.entries().size(), names.size());
  EXPECT_EQ(json::parse(ckpt.metadata_json()), (json{{"epoch", "3"}, {"note", "caf\xc3\xa9 \"quoted\"\n"}}));
  for (size_t i = 0; i < names.size(); ++i) {
    const io::TensorInfo* info = nullptr;
    for (const auto& e : ckpt.entries())
      if (e.name == names[i]) info = &e;
    ASSERT_NE(info, nullptr) << names[i];
    EXPECT_EQ(info->dtype, tensors[i].dtype);
    EXPECT_EQ(info->shape, tensors[i].shape);
    const Tensor back = ckpt.read(names[i], dev);
    EXPECT_EQ(back.device(), dev);
    EXPECT_EQ(back.dtype, tensors[i].dtype);
    EXPECT_EQ(back.shape, tensors[i].shape) << names[i];
    EXPECT_EQ(host_bytes(back), want[i]) << names[i];
  }
  // Other devices read the same file.
  const Tensor on_cpu = ckpt.read(names[0], iotest::device("cpu"));
  EXPECT_EQ(host_bytes(on_cpu), want[0]);
}

INSTANTIATE_TEST_SUITE_P(Devices, CheckpointRoundTrip, ::testing::Values("cpu", "sim"));

// Tensors move in chunks (io::kChunkBytes): a tensor over two chunks long
// round-trips, host memory stays at one chunk while saving and loading, and
// damage in a later chunk is still caught.
TEST(Checkpoint, LargeTensorsMoveInChunks) {
  Device* dev = iotest::device("cpu");
  TempDir dir;
  const Shape s = S({static_cast<int64_t>(2 * io::kChunkBytes + 5)});
  const auto want = random_bytes(SPORA_DTYPE_U8, s, 21);
  const Tensor t = tensor_from_host(dev, SPORA_DTYPE_U8, s, want.data(), want.size());
  const std::string p = dir.file("big");
  iotest::reset_max_allocation();
  io::save_checkpoint(p, {"big"}, {&t}, {});
  EXPECT_LE(iotest::max_allocation(), io::kChunkBytes + 65536) << "save held more than a chunk";
  std::vector<uint8_t> got;
  {
    io::Checkpoint c(p);
    iotest::reset_max_allocation();
    const Tensor back = c.read("big", dev);
    EXPECT_LE(iotest::max_allocation(), io::kChunkBytes + 65536) << "load held more than a chunk";
    got = host_bytes(back);
  }
  EXPECT_EQ(got, want);
  std::vector<uint8_t> f = iotest::slurp(p);
  f[f.size() - 3] ^= 4;  // in the last chunk
  iotest::spit(p, f);
  io::Checkpoint c(p);
  EXPECT_NE(error_of([&] { c.read("big", dev); }).find("tensor 'big' is corrupted"), std::string::npos);
}

TEST(Checkpoint, EmptyCheckpointAndNoMetadata) {
  TempDir dir;
  io::save_checkpoint(dir.file("e"), {}, {}, {});
  io::Checkpoint c(dir.file("e"));
  EXPECT_TRUE(c.entries().empty());
  EXPECT_EQ(c.metadata_json(), "{}");
}

// The file is a safetensors file any reader of that format accepts: parsed
// here by hand against the format's rules (contiguous data covering the
// whole data section, dtype names), plus Spora's alignment and CRCs.
TEST(Checkpoint, LayoutIsSafetensors) {
  Device* dev = iotest::device("cpu");
  TempDir dir;
  std::vector<std::string> names;
  std::vector<Tensor> ts;
  uint32_t seed = 11;
  for (DType dt : {SPORA_DTYPE_U8, SPORA_DTYPE_F32, SPORA_DTYPE_F16, SPORA_DTYPE_I64, SPORA_DTYPE_BOOL}) {
    names.push_back(std::string("t_") + dtype_name(dt));
    const auto b = random_bytes(dt, S({3, 3}), seed++);
    ts.push_back(tensor_from_host(dev, dt, S({3, 3}), b.data(), b.size()));
  }
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : ts) ptrs.push_back(&t);
  io::save_checkpoint(dir.file("l"), names, ptrs, {{"k", "v"}});
  const std::vector<uint8_t> f = iotest::slurp(dir.file("l"));
  ASSERT_GE(f.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | f[static_cast<size_t>(i)];
  ASSERT_LE(8 + n, f.size());
  EXPECT_EQ((8 + n) % 64, 0u) << "data section starts on a 64-byte boundary";
  EXPECT_EQ(f[8], '{');
  const json h = json::parse(f.begin() + 8, f.begin() + static_cast<long>(8 + n));
  const uint64_t data = f.size() - 8 - n;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  const std::map<std::string, size_t> es = {{"U8", 1}, {"F32", 4}, {"F16", 2}, {"I64", 8}, {"BOOL", 1}};
  for (const auto& [k, v] : h.items()) {
    if (k == "__metadata__") continue;
    const std::string dt = v["dtype"];
    ASSERT_TRUE(es.count(dt)) << dt;
    EXPECT_EQ(v["shape"], json::array({3, 3}));
    const uint64_t b = v["data_offsets"][0], e = v["data_offsets"][1];
    EXPECT_EQ(e - b, 9 * es.at(dt));
    EXPECT_EQ((8 + n + b) % es.at(dt), 0u) << k << " is aligned to its element size";
    ranges.emplace_back(b, e);
    const std::string crc = h["__metadata__"]["spora.crc32c." + k];
    EXPECT_EQ(crc, fmt::format("{:08x}", io::crc32c(f.data() + 8 + n + b, e - b)));
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [b, e] : ranges) {
    EXPECT_EQ(b, at) << "contiguous";
    at = e;
  }
  EXPECT_EQ(at, data) << "the tensors cover the data section exactly";
  EXPECT_EQ(h["__metadata__"]["spora.format"], "checkpoint");
  EXPECT_EQ(h["__metadata__"]["spora.version"], "1");
  EXPECT_EQ(h["__metadata__"]["k"], "v");
}

// A file written by another tool: no Spora metadata, no CRCs, still reads.
TEST(Checkpoint, ForeignSafetensorsFileOpens) {
  TempDir dir;
  const std::string header = R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::vector<uint8_t> b(8);
  b[0] = static_cast<uint8_t>(header.size());
  b.insert(b.end(), header.begin(), header.end());
  const float v[2] = {1.5f, -2.0f};
  b.insert(b.end(), reinterpret_cast<const uint8_t*>(v), reinterpret_cast<const uint8_t*>(v) + 8);
  iotest::spit(dir.file("pt.safetensors"), b);
  io::Checkpoint c(dir.file("pt.safetensors"));
  EXPECT_EQ(c.metadata_json(), R"({"format":"pt"})");
  const Tensor t = c.read("w", iotest::device("cpu"));
  float got[2];
  tensor_read(t, got, sizeof got);
  EXPECT_EQ(got[0], 1.5f);
  EXPECT_EQ(got[1], -2.0f);
}

TEST(Checkpoint, BadArgumentsAreErrorsBeforeTheFileExists) {
  Device* dev = iotest::device("cpu");
  TempDir dir;
  const Tensor t = tensor_from_host(dev, SPORA_DTYPE_F32, S({2}), nullptr, 0);
  const std::string p = dir.file("x");
  EXPECT_NE(error_of([&] { io::save_checkpoint(p, {"a", "a"}, {&t, &t}, {}); }).find("'a' appears twice"),
            std::string::npos);
  EXPECT_NE(error_of([&] { io::save_checkpoint(p, {""}, {&t}, {}); }).find("empty"), std::string::npos);
  EXPECT_NE(error_of([&] { io::save_checkpoint(p, {"__metadata__"}, {&t}, {}); }).find("__metadata__"),
            std::string::npos);
  EXPECT_NE(error_of([&] { io::save_checkpoint(p, {"\xff"}, {&t}, {}); }).find("UTF-8"), std::string::npos);
  EXPECT_NE(error_of([&] { io::save_checkpoint(p, {"a"}, {nullptr}, {}); }).find("'a' is null"), std::string::npos);
  EXPECT_NE(error_of([&] { io::save_checkpoint(p, {"a"}, {&t}, {{"spora.format", "x"}}); }).find("reserved"),
            std::string::npos);
  EXPECT_TRUE(dir.list().empty()) << "nothing written, no temporary left";
  // User metadata must be a JSON object of strings.
  for (const char* bad : {"[1]", "{\"a\": 1}", "{\"a\": {\"b\": \"c\"}}", "{\"a\": \"x\", \"a\": \"y\"}", "{\"a\"",
                          "\"s\"", "{\"a\": null}"})
    EXPECT_THROW(io::parse_string_map(bad, "checkpoint"), Error) << bad;
  EXPECT_EQ(io::parse_string_map(" {\"a\": \"1\", \"b\": \"\"} ", "checkpoint"),
            (std::map<std::string, std::string>{{"a", "1"}, {"b", ""}}));
}

// ---- hostile files ----

// A small valid file, cut at every length: every prefix is a clean error
// naming the file, and nothing large is allocated.
TEST(CheckpointHostile, TruncatedAtEveryByte) {
  Device* dev = iotest::device("cpu");
  TempDir dir;
  const float v[3] = {1, 2, 3};
  const Tensor a = tensor_from_host(dev, SPORA_DTYPE_F32, S({3}), v, sizeof v);
  const Tensor b = tensor_from_host(dev, SPORA_DTYPE_U8, S({2}), "xy", 2);
  io::save_checkpoint(dir.file("good"), {"a", "b"}, {&a, &b}, {{"m", "n"}});
  const std::vector<uint8_t> good = iotest::slurp(dir.file("good"));
  ASSERT_GT(good.size(), 64u);
  const std::string cut = dir.file("cut");
  iotest::reset_max_allocation();
  for (size_t n = 0; n < good.size(); ++n) {
    iotest::spit(cut, std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(n)));
    const std::string err = open_error(cut);
    ASSERT_NE(err, "") << "a file cut to " << n << " bytes opened";
    EXPECT_NE(err.find(cut), std::string::npos) << err;
  }
  EXPECT_LT(iotest::max_allocation(), size_t{1} << 20);
  EXPECT_EQ(open_error(dir.file("good")), "");
}

struct Hostile {
  const char* what;
  std::string header;
  size_t data;
  uint64_t len;
  const char* expect;  // a part of the message
};

TEST(CheckpointHostile, MalformedHeadersAreCleanErrors) {
  TempDir dir;
  const std::string ok_t = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::vector<Hostile> cases = {
      {"length past EOF", "{}", 0, 1000, "runs past the end of the file"},
      {"huge length", "{}", 0, uint64_t{1} << 62, "runs past the end"},
      {"length too small", "{}", 0, 1, "too short"},
      {"not JSON", "{nope", 0, UINT64_MAX, "not valid JSON"},
      {"not an object", "[1, 2]", 0, UINT64_MAX, "not a JSON object"},
      {"trailing garbage", "{} x", 0, UINT64_MAX, "not valid JSON"},
      {"deep nesting", std::string(100000, '['), 0, UINT64_MAX, "not a JSON object"},
      {"nested in tensor", R"({"t":{"dtype":"F32","shape":[[[[1]]]],"data_offsets":[0,4]}})", 4, UINT64_MAX,
       "shape holds an array"},
      {"unknown dtype", R"({"t":{"dtype":"I16","shape":[2],"data_offsets":[0,4]}})", 4, UINT64_MAX,
       "dtype 'I16' is not one Spora reads"},
      {"wrong dtype size", R"({"t":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", 8, UINT64_MAX,
       "needs 16 bytes, data_offsets give 8"},
      {"offsets past data", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4, UINT64_MAX,
       "outside the data section"},
      {"reversed offsets", R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", 4, UINT64_MAX,
       "outside the data section"},
      {"huge offsets", R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[18446744073709551612,18446744073709551615]}})",
       4, UINT64_MAX, "outside the data section"},
      {"huge shape", R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8, UINT64_MAX,
       "too large"},
      {"overflowing shape", R"({"t":{"dtype":"F32","shape":[9223372036854775807,9223372036854775807,2],"data_offsets":[0,8]}})",
       8, UINT64_MAX, "too large"},
      {"overlap", "{" + ok_t + R"(,"u":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12, UINT64_MAX,
       "overlap"},
      {"duplicate name", "{" + ok_t + "," + ok_t + "}", 8, UINT64_MAX, "tensor name 't' appears twice"},
      {"duplicate field", R"({"t":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8, UINT64_MAX,
       "field 'dtype' appears twice"},
      {"missing field", R"({"t":{"dtype":"F32","shape":[2]}})", 8, UINT64_MAX, "missing field 'data_offsets'"},
      {"unknown field", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8, UINT64_MAX,
       "unknown field 'x'"},
      {"negative dim", R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, UINT64_MAX, "negative"},
      {"float dim", R"({"t":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8, UINT64_MAX, "integers"},
      {"rank 9", R"({"t":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})", 1, UINT64_MAX,
       "more than 8 dimensions"},
      {"three offsets", R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1,1]}})", 1, UINT64_MAX, "[begin, end]"},
      {"one offset", R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1, UINT64_MAX, "[begin, end]"},
      {"tensor not an object", R"({"t":[1]})", 0, UINT64_MAX, "not a tensor entry"},
      {"metadata not strings", R"({"__metadata__":{"a":1}})", 0, UINT64_MAX, "metadata 'a' is a number"},
      {"metadata duplicate", R"({"__metadata__":{"a":"1","a":"2"}})", 0, UINT64_MAX, "appears twice"},
      {"NUL in a name", "{\"t\\u0000x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, UINT64_MAX,
       "NUL"},
      {"invalid UTF-8", "{\"\xff\":{}}", 0, UINT64_MAX, "not valid JSON"},
      {"spora file without CRC", R"({"__metadata__":{"spora.format":"checkpoint","spora.version":"1"},)" + ok_t + "}",
       8, UINT64_MAX, "tensor 't' has no CRC"},
      {"CRC of no tensor", R"({"__metadata__":{"spora.crc32c.q":"00000000"}})", 0, UINT64_MAX,
       "CRC for 'q', which is not a tensor"},
      {"malformed CRC", R"({"__metadata__":{"spora.crc32c.t":"xyz"},)" + ok_t + "}", 8, UINT64_MAX, "malformed CRC"},
      {"newer version", R"({"__metadata__":{"spora.format":"checkpoint","spora.version":"7"}})", 0, UINT64_MAX,
       "newer Spora"},
      {"unknown format", R"({"__metadata__":{"spora.format":"zip","spora.version":"1"}})", 0, UINT64_MAX,
       "unknown spora.format"},
  };
  for (const Hostile& h : cases) {
    const std::string p = dir.file("h");
    iotest::raw_file(p, h.header, h.data, h.len);
    iotest::reset_max_allocation();
    const std::string err = open_error(p);
    EXPECT_NE(err.find(h.expect), std::string::npos) << h.what << ": " << err;
    EXPECT_NE(err.find(p), std::string::npos) << h.what << ": " << err;
    EXPECT_LT(iotest::max_allocation(), size_t{1} << 20) << h.what;
  }
  EXPECT_NE(open_error(dir.file("missing")).find("No such file"), std::string::npos);
  EXPECT_NE(open_error(dir.path()).find("not a regular file"), std::string::npos);
  iotest::spit(dir.file("short"), {1, 2, 3});
  EXPECT_NE(open_error(dir.file("short")).find("too short"), std::string::npos);
}

// Every bit of every tensor's data is covered by its CRC: a flipped bit is
// an error naming the tensor and the file; the other tensors still read.
TEST(CheckpointHostile, FlippedBitIsCaughtByTheCrc) {
  Device* dev = iotest::device("cpu");
  TempDir dir;
  const auto wa = random_bytes(SPORA_DTYPE_F64, S({5}), 3);
  const auto wb = random_bytes(SPORA_DTYPE_I32, S({3}), 4);
  const Tensor a = tensor_from_host(dev, SPORA_DTYPE_F64, S({5}), wa.data(), wa.size());
  const Tensor b = tensor_from_host(dev, SPORA_DTYPE_I32, S({3}), wb.data(), wb.size());
  io::save_checkpoint(dir.file("c"), {"alpha", "beta"}, {&a, &b}, {});
  const std::vector<uint8_t> good = iotest::slurp(dir.file("c"));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | good[static_cast<size_t>(i)];
  const size_t data_start = 8 + n;
  for (size_t byte = data_start; byte < good.size(); ++byte)
    for (int bit = 0; bit < 8; bit += 3) {
      std::vector<uint8_t> bad = good;
      bad[byte] ^= static_cast<uint8_t>(1u << bit);
      iotest::spit(dir.file("bad"), bad);
      io::Checkpoint c(dir.file("bad"));  // the layout is fine
      // alpha (f64, 40 bytes) comes first: the larger element size.
      const std::string hit = byte - data_start < 40 ? "alpha" : "beta";
      const std::string other = hit == "alpha" ? "beta" : "alpha";
      const std::string err = error_of([&] { c.read(hit, dev); });
      EXPECT_NE(err.find("tensor '" + hit + "' is corrupted"), std::string::npos) << err;
      EXPECT_NE(err.find(dir.file("bad")), std::string::npos) << err;
      EXPECT_EQ(error_of([&] { c.read(other, dev); }), "");
    }
}

// ---- atomic commit ----

std::vector<uint8_t> read_a(const std::string& path) {
  io::Checkpoint c(path);
  return host_bytes(c.read("a", iotest::device("cpu")));
}

TEST(CheckpointAtomic, FailedSavesLeaveTheOldFileLoadable) {
  Device* dev = iotest::device("cpu");
  TempDir dir;
  const std::string p = dir.file("ckpt");
  const auto old_bytes = random_bytes(SPORA_DTYPE_F32, S({4}), 5);
  const Tensor old_t = tensor_from_host(dev, SPORA_DTYPE_F32, S({4}), old_bytes.data(), old_bytes.size());
  io::save_checkpoint(p, {"a"}, {&old_t}, {});
  const auto file_before = iotest::slurp(p);

  // Bad arguments: rejected before anything is written.
  EXPECT_THROW(io::save_checkpoint(p, {"a", "b"}, {&old_t, nullptr}, {}), Error);
  EXPECT_THROW(io::save_checkpoint(p, {"a"}, {&old_t}, {{"spora.x", "y"}}), Error);

  // A write that fails half-way (the file size limit makes write() fail
  // with EFBIG once the temporary file reaches 4 KiB).
  std::vector<float> big(100000, 1.0f);
  const Tensor big_t = tensor_from_host(dev, SPORA_DTYPE_F32, S({100000}), big.data(), big.size() * 4);
  struct rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string err = error_of([&] { io::save_checkpoint(p, {"a"}, {&big_t}, {}); });
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  EXPECT_NE(err.find("cannot write"), std::string::npos) << err;
  EXPECT_NE(err.find(p + ".tmp."), std::string::npos) << err;

  EXPECT_EQ(iotest::slurp(p), file_before);
  EXPECT_EQ(read_a(p), old_bytes);
  EXPECT_EQ(dir.list(), std::vector<std::string>{"ckpt"}) << "no temporary file left behind";

  // And a good save replaces it.
  io::save_checkpoint(p, {"a"}, {&big_t}, {});
  std::vector<uint8_t> want(big.size() * 4);
  std::memcpy(want.data(), big.data(), want.size());
  EXPECT_EQ(read_a(p), want);
  EXPECT_EQ(dir.list(), std::vector<std::string>{"ckpt"});
}

TEST(CheckpointAtomic, ReadOnlyDirectory) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  Device* dev = iotest::device("cpu");
  TempDir dir;
  const std::string p = dir.file("ckpt");
  const auto bytes = random_bytes(SPORA_DTYPE_F32, S({4}), 6);
  const Tensor t = tensor_from_host(dev, SPORA_DTYPE_F32, S({4}), bytes.data(), bytes.size());
  io::save_checkpoint(p, {"a"}, {&t}, {});
  std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  const Tensor t2 = tensor_from_host(dev, SPORA_DTYPE_F32, S({4}), nullptr, 0);
  const std::string err = error_of([&] { io::save_checkpoint(p, {"a"}, {&t2}, {}); });
  std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all);
  EXPECT_NE(err.find("cannot create"), std::string::npos) << err;
  EXPECT_EQ(read_a(p), bytes);
}

// An open checkpoint keeps reading the file it opened, even when a new save
// replaces the path meanwhile.
TEST(CheckpointAtomic, OpenHandleSurvivesReplacement) {
  Device* dev = iotest::device("cpu");
  TempDir dir;
  const std::string p = dir.file("ckpt");
  const auto v1 = random_bytes(SPORA_DTYPE_F32, S({8}), 8), v2 = random_bytes(SPORA_DTYPE_F32, S({8}), 9);
  const Tensor t1 = tensor_from_host(dev, SPORA_DTYPE_F32, S({8}), v1.data(), v1.size());
  const Tensor t2 = tensor_from_host(dev, SPORA_DTYPE_F32, S({8}), v2.data(), v2.size());
  io::save_checkpoint(p, {"a"}, {&t1}, {});
  io::Checkpoint c(p);
  io::save_checkpoint(p, {"a"}, {&t2}, {});
  EXPECT_EQ(host_bytes(c.read("a", dev)), v1);
  EXPECT_EQ(read_a(p), v2);
}

// ---- the C API ----

TEST(CheckpointCApi, SaveOpenEntriesMetadataRead) {
  Device* dev = iotest::device("sim");
  spora_device_t* d = iotest::handle(dev);
  TempDir dir;
  const std::string p = dir.file("c.safetensors");
  const int64_t shape[2] = {2, 3};
  const double vals[6] = {1, 2, 3, 4, 5, 6};
  spora_tensor_t *a = nullptr, *s = nullptr;
  ASSERT_EQ(spora_tensor_create(d, SPORA_DTYPE_F64, shape, 2, vals, sizeof vals, &a), SPORA_OK);
  const int32_t one = 1;
  ASSERT_EQ(spora_tensor_create(d, SPORA_DTYPE_I32, nullptr, 0, &one, 4, &s), SPORA_OK);
  const char* names[2] = {"layer.w", "step"};
  spora_tensor_t* ts[2] = {a, s};
  ASSERT_EQ(spora_checkpoint_save(p.c_str(), names, ts, 2, "{\"epoch\": \"2\"}"), SPORA_OK) << spora_last_error();
  EXPECT_EQ(spora_checkpoint_save(p.c_str(), names, ts, 2, "{\"epoch\": 2}"), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(spora_last_error()).find("metadata 'epoch' is a number"), std::string::npos);
  EXPECT_EQ(spora_checkpoint_save(nullptr, names, ts, 2, nullptr), SPORA_ERROR_INVALID_ARGUMENT);
  const char* null_name[1] = {nullptr};
  EXPECT_EQ(spora_checkpoint_save(p.c_str(), null_name, ts, 1, nullptr), SPORA_ERROR_INVALID_ARGUMENT);

  spora_checkpoint_t* c = nullptr;
  ASSERT_EQ(spora_checkpoint_open(p.c_str(), &c), SPORA_OK) << spora_last_error();
  size_t n = 0;
  ASSERT_EQ(spora_checkpoint_count(c, &n), SPORA_OK);
  ASSERT_EQ(n, 2u);
  const char* name = nullptr;
  spora_dtype_t dt = SPORA_DTYPE_INVALID;
  int64_t dims[SPORA_MAX_NDIM];
  int32_t nd = -1;
  ASSERT_EQ(spora_checkpoint_entry(c, 0, &name, &dt, dims, SPORA_MAX_NDIM, &nd), SPORA_OK);
  EXPECT_STREQ(name, "layer.w");  // f64 first: larger elements
  EXPECT_EQ(dt, SPORA_DTYPE_F64);
  EXPECT_EQ(nd, 2);
  EXPECT_EQ(dims[0], 2);
  EXPECT_EQ(dims[1], 3);
  EXPECT_EQ(spora_checkpoint_entry(c, 0, nullptr, nullptr, dims, 1, nullptr), SPORA_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(spora_checkpoint_entry(c, 1, &name, &dt, nullptr, 0, &nd), SPORA_OK);
  EXPECT_STREQ(name, "step");
  EXPECT_EQ(nd, 0);
  EXPECT_EQ(spora_checkpoint_entry(c, 2, &name, &dt, dims, 8, &nd), SPORA_ERROR_INVALID_ARGUMENT);
  const char* meta = nullptr;
  ASSERT_EQ(spora_checkpoint_metadata(c, &meta), SPORA_OK);
  EXPECT_STREQ(meta, "{\"epoch\":\"2\"}");
  spora_tensor_t* back = nullptr;
  ASSERT_EQ(spora_checkpoint_read(c, "layer.w", d, &back), SPORA_OK) << spora_last_error();
  double got[6];
  ASSERT_EQ(spora_tensor_read(back, got, sizeof got), SPORA_OK);
  EXPECT_EQ(std::vector<double>(got, got + 6), std::vector<double>(vals, vals + 6));
  EXPECT_EQ(spora_checkpoint_read(c, "nope", d, &back), SPORA_ERROR_NOT_FOUND);
  EXPECT_NE(std::string(spora_last_error()).find("no tensor 'nope'"), std::string::npos);
  EXPECT_EQ(spora_checkpoint_read(c, "step", nullptr, &back), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(spora_checkpoint_close(c), SPORA_OK);
  EXPECT_EQ(spora_checkpoint_close(nullptr), SPORA_OK);
  spora_checkpoint_t* none = nullptr;
  EXPECT_EQ(spora_checkpoint_open(dir.file("missing").c_str(), &none), SPORA_ERROR_NOT_FOUND);
  EXPECT_EQ(none, nullptr);
  spora_tensor_free(back);
  spora_tensor_free(a);
  spora_tensor_free(s);
}

}  // namespace
}  // namespace spora
