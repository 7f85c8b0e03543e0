// The data pipeline (core/src/data): IDX parsing of hand-written files
// (plain and gzip, every type code, damaged ones), sampler, shuffle, map
// determinism across worker counts, batch / repeat counts and errors.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "data/dataset.h"
#include "data/idx.h"
#include "data/iterator.h"
#include "support/error.h"

namespace fs = std::filesystem;
using namespace spora::data;

namespace {

struct TempDir {
  fs::path p;
  TempDir() {
    p = fs::temp_directory_path() / ("spora_data_test_" + std::to_string(::getpid()));
    fs::create_directories(p);
  }
  ~TempDir() { fs::remove_all(p); }
  std::string file(const std::string& name) const { return (p / name).string(); }
};

std::vector<uint8_t> idx_header(uint8_t code, std::vector<uint32_t> dims) {
  std::vector<uint8_t> b{0, 0, code, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
  return b;
}

void write_plain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
}

// An images file of n 3x4 u8 images (pixel = 7*sample + position) and a
// labels file (label = sample % 10).
std::pair<std::string, std::string> small_mnist(const TempDir& t, uint32_t n, bool gz) {
  std::vector<uint8_t> img = idx_header(0x08, {n, 3, 4}), lbl = idx_header(0x08, {n});
  for (uint32_t i = 0; i < n; ++i) {
    for (int k = 0; k < 12; ++k) img.push_back(static_cast<uint8_t>(7 * i + k));
    lbl.push_back(static_cast<uint8_t>(i % 10));
  }
  const std::string a = t.file(gz ? "img.gz" : "img"), b = t.file(gz ? "lbl.gz" : "lbl");
  if (gz) {
    write_gz(a, img);
    write_gz(b, lbl);
  } else {
    write_plain(a, img);
    write_plain(b, lbl);
  }
  return {a, b};
}

DatasetPtr mnist_like(const TempDir& t, uint32_t n) {
  auto [a, b] = small_mnist(t, n, true);
  return make_source(idx_source({a, b}, {"image", "label"}, {SPORA_DTYPE_INVALID, SPORA_DTYPE_I32}));
}

std::vector<Row> collect(const DatasetPtr& d, uint64_t epoch = 0) {
  Iterator it(d, epoch, 3);
  std::vector<Row> rows;
  Row r;
  while (it.next(r)) rows.push_back(std::move(r));
  return rows;
}

std::vector<int32_t> labels_of(const std::vector<Row>& rows) {
  std::vector<int32_t> out;
  for (const Row& r : rows)
    for (int64_t i = 0; i < r[1].numel(); ++i) out.push_back(r[1].as<int32_t>()[i]);
  return out;
}

// First pixel identifies the sample in small_mnist (7 * i mod 256, distinct for i < 37).
int first_pixel_sample(const Column& img) { return img.as<uint8_t>()[0] / 7; }

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const spora::Error& e) {
    return e.what();
  }
  return "";
}

TransformPtr op(const std::string& name, spora::Attrs a = {}) { return make_transform(name, a); }

}  // namespace

TEST(DataIdx, EveryTypeCodePlainAndGzip) {
  TempDir t;
  // i16 big-endian -2, 300; f32 1.5, -0.25; f64 3.0; i8 -5
  std::vector<uint8_t> i16 = idx_header(0x0B, {2});
  for (uint8_t b : {0xFF, 0xFE, 0x01, 0x2C}) i16.push_back(b);
  std::vector<uint8_t> f32 = idx_header(0x0D, {2});
  for (uint8_t b : {0x3F, 0xC0, 0x00, 0x00, 0xBE, 0x80, 0x00, 0x00}) f32.push_back(b);
  std::vector<uint8_t> f64 = idx_header(0x0E, {1, 1});
  for (uint8_t b : {0x40, 0x08, 0, 0, 0, 0, 0, 0}) f64.push_back(b);
  std::vector<uint8_t> i8 = idx_header(0x09, {1});
  i8.push_back(0xFB);
  for (bool gz : {false, true}) {
    auto w = [&](const std::string& n, const std::vector<uint8_t>& b) {
      const std::string p = t.file(n + (gz ? ".gz" : ""));
      gz ? write_gz(p, b) : write_plain(p, b);
      return p;
    };
    Column a = read_idx(w("i16", i16));
    ASSERT_EQ(a.dtype, SPORA_DTYPE_I32);
    EXPECT_EQ(a.as<int32_t>()[0], -2);
    EXPECT_EQ(a.as<int32_t>()[1], 300);
    Column b = read_idx(w("f32", f32));
    ASSERT_EQ(b.dtype, SPORA_DTYPE_F32);
    EXPECT_EQ(b.as<float>()[0], 1.5f);
    EXPECT_EQ(b.as<float>()[1], -0.25f);
    Column c = read_idx(w("f64", f64));
    EXPECT_EQ(c.shape, (std::vector<int64_t>{1, 1}));
    EXPECT_EQ(c.as<double>()[0], 3.0);
    EXPECT_EQ(read_idx(w("i8", i8)).as<int32_t>()[0], -5);
  }
}

TEST(DataIdx, DamagedFilesNameTheFile) {
  TempDir t;
  std::vector<uint8_t> good = idx_header(0x08, {4, 2});
  for (int i = 0; i < 8; ++i) good.push_back(static_cast<uint8_t>(i));

  std::vector<uint8_t> cut(good.begin(), good.end() - 3);
  write_plain(t.file("cut"), cut);
  EXPECT_NE(error_of([&] { read_idx(t.file("cut")); }).find("cut: truncated"), std::string::npos);

  std::vector<uint8_t> magic = good;
  magic[0] = 0x12;
  write_plain(t.file("magic"), magic);
  EXPECT_NE(error_of([&] { read_idx(t.file("magic")); }).find("magic: not an IDX file (bad magic"), std::string::npos);

  std::vector<uint8_t> code = good;
  code[2] = 0x07;
  write_plain(t.file("code"), code);
  EXPECT_NE(error_of([&] { read_idx(t.file("code")); }).find("unknown IDX type code 0x07"), std::string::npos);

  std::vector<uint8_t> extra = good;
  extra.push_back(1);
  write_plain(t.file("extra"), extra);
  EXPECT_NE(error_of([&] { read_idx(t.file("extra")); }).find("extra:"), std::string::npos);

  std::vector<uint8_t> header = idx_header(0x08, {4, 2});
  header.resize(6);
  write_plain(t.file("header"), header);
  EXPECT_NE(error_of([&] { read_idx(t.file("header")); }).find("header is truncated"), std::string::npos);

  // A gzip stream cut in the middle (the download that stopped early).
  write_gz(t.file("full.gz"), good);
  std::ifstream in(t.file("full.gz"), std::ios::binary);
  std::vector<char> gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  gz.resize(gz.size() - 12);
  std::ofstream(t.file("cut.gz"), std::ios::binary).write(gz.data(), gz.size());
  const std::string m = error_of([&] { read_idx(t.file("cut.gz")); });
  EXPECT_NE(m.find("cut.gz"), std::string::npos) << m;

  try {
    read_idx(t.file("missing"));
    FAIL();
  } catch (const spora::Error& e) {
    EXPECT_EQ(e.code(), spora::Code::kNotFound);
  }
}

// Found by tests/fuzz (corpus/idx/crash-zero-dim-overflow): a zero
// dimension made the element count 0, so dimensions whose product overflows
// int64 passed the cap and Column::numel overflowed on them.
TEST(DataIdx, HugeDimensionsBesideAZeroAreRefused) {
  TempDir t;
  write_plain(t.file("zero"), idx_header(0x08, {0x5b000000u, 0x0300fd1bu, 0x700u, 0xd02u, 0u}));
  const std::string m = error_of([&] { read_idx(t.file("zero")); });
  EXPECT_NE(m.find("zero: IDX header dimensions"), std::string::npos) << m;
  EXPECT_NE(m.find("more than 2^34 elements (the zero aside)"), std::string::npos) << m;
  // An empty file of sane dimensions still reads (0 samples of 28 x 28).
  write_plain(t.file("empty"), idx_header(0x08, {0u, 28u, 28u}));
  EXPECT_EQ(read_idx(t.file("empty")).numel(), 0);
  // A 20-byte file claiming 2^33 elements: refused as truncated.
  write_plain(t.file("claim"), idx_header(0x08, {1u << 17, 1u << 16}));
  EXPECT_NE(error_of([&] { read_idx(t.file("claim")); }).find("claim: truncated"), std::string::npos);
}

TEST(DataIdx, MismatchedSampleCounts) {
  TempDir t;
  auto [a, b] = small_mnist(t, 5, false);
  std::vector<uint8_t> lbl = idx_header(0x08, {4});
  for (int i = 0; i < 4; ++i) lbl.push_back(0);
  write_plain(t.file("lbl4"), lbl);
  const std::string m = error_of([&] { idx_source({a, t.file("lbl4")}, {"image", "label"}, {}); });
  EXPECT_NE(m.find("mismatched sample counts"), std::string::npos) << m;
  EXPECT_NE(m.find("lbl4"), std::string::npos) << m;
}

TEST(DataPipeline, SourceRowsInOrder) {
  TempDir t;
  const auto rows = collect(mnist_like(t, 12));
  ASSERT_EQ(rows.size(), 12u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][0].shape, (std::vector<int64_t>{3, 4}));
    EXPECT_EQ(rows[i][0].as<uint8_t>()[5], static_cast<uint8_t>(7 * i + 5));
    EXPECT_EQ(rows[i][1].as<int32_t>()[0], static_cast<int32_t>(i % 10));
  }
}

TEST(DataPipeline, ShuffleIsReproduciblePermutation) {
  TempDir t;
  const DatasetPtr src = mnist_like(t, 30);
  for (const DatasetPtr& d : {with_sampler(src, true, 7, 1, 0), make_shuffle(src, 8, 7), make_shuffle(src, 100, 7)}) {
    std::vector<int> seen;
    for (const Row& r : collect(d, 2)) seen.push_back(first_pixel_sample(r[0]));
    std::vector<int> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < 30; ++i) EXPECT_EQ(sorted[i], i);
    std::vector<int> again;
    for (const Row& r : collect(d, 2)) again.push_back(first_pixel_sample(r[0]));
    EXPECT_EQ(seen, again);  // same seed and epoch
    std::vector<int> next_epoch;
    for (const Row& r : collect(d, 3)) next_epoch.push_back(first_pixel_sample(r[0]));
    EXPECT_NE(seen, next_epoch);
    std::vector<int> ident(30);
    for (int i = 0; i < 30; ++i) ident[i] = i;
    EXPECT_NE(seen, ident);
  }
}

TEST(DataPipeline, ShardsDisjointEqualAndCovering) {
  TempDir t;
  const DatasetPtr src = mnist_like(t, 30);
  for (int64_t shards : {3, 4}) {
    std::multiset<int> all;
    for (int64_t k = 0; k < shards; ++k) {
      const DatasetPtr d = with_sampler(src, true, 11, shards, k);
      EXPECT_EQ(d->size(), (30 + shards - 1) / shards);
      const auto rows = collect(d, 1);
      EXPECT_EQ(static_cast<int64_t>(rows.size()), d->size());
      for (const Row& r : rows) all.insert(first_pixel_sample(r[0]));
    }
    std::set<int> distinct(all.begin(), all.end());
    EXPECT_EQ(distinct.size(), 30u);                                      // covering
    EXPECT_EQ(all.size() - distinct.size(), static_cast<size_t>((shards - 30 % shards) % shards));  // only padding repeats
  }
  EXPECT_NE(error_of([&] { with_sampler(src, false, 0, 3, 3); }).find("shard_id 3"), std::string::npos);
}

TEST(DataPipeline, MapSameForAnyWorkerCount) {
  TempDir t;
  const DatasetPtr src = make_shuffle(mnist_like(t, 36), 10, 3);
  spora::Attrs crop;
  crop.set("size", spora::AttrValue::of_ints({3, 4}));
  crop.set("padding", spora::AttrValue::of_ints({2}));
  spora::Attrs rescale;
  rescale.set("rescale", spora::AttrValue::of_float(1.0 / 255));
  std::vector<std::vector<uint8_t>> outputs;
  for (int workers : {1, 2, 4}) {
    const DatasetPtr d = make_batch(
        make_map(src, {op("random_horizontal_flip"), op("random_crop", crop), op("rescale", rescale), op("hwc2chw")},
                 {"image"}, workers, 42),
        5, false);
    std::vector<uint8_t> all;
    for (const Row& r : collect(d, 1)) all.insert(all.end(), r[0].bytes.begin(), r[0].bytes.end());
    outputs.push_back(all);
  }
  ASSERT_EQ(outputs[0].size(), 36u * 12 * 4);
  EXPECT_EQ(outputs[0], outputs[1]);
  EXPECT_EQ(outputs[0], outputs[2]);
}

TEST(DataPipeline, BatchRepeatCounts) {
  TempDir t;
  const DatasetPtr src = mnist_like(t, 23);
  EXPECT_EQ(make_batch(src, 5, false)->size(), 5);
  EXPECT_EQ(collect(make_batch(src, 5, false)).size(), 5u);
  EXPECT_EQ(collect(make_batch(src, 5, false)).back()[0].shape, (std::vector<int64_t>{3, 3, 4}));
  EXPECT_EQ(make_batch(src, 5, true)->size(), 4);
  EXPECT_EQ(collect(make_batch(src, 5, true)).size(), 4u);
  const DatasetPtr rep = make_batch(make_repeat(src, 3), 10, false);
  EXPECT_EQ(rep->size(), 7);
  const auto rows = collect(rep);
  ASSERT_EQ(rows.size(), 7u);
  const auto labels = labels_of(rows);
  ASSERT_EQ(labels.size(), 69u);
  for (size_t i = 0; i < labels.size(); ++i) EXPECT_EQ(labels[i], static_cast<int32_t>((i % 23) % 10));
}

TEST(DataPipeline, BatchOfMismatchedShapesNamesColumn) {
  // Two sources of different widths concatenated is not an op; a random
  // crop larger than some rows is. Rows of (1, 2) and (2, 2) come from a
  // random_crop of size 1x2 applied to only... the built-ins keep shapes
  // uniform, so feed ragged rows directly through the batch node.
  class Ragged final : public Node {
   public:
    void reset(uint64_t) override { i_ = 0; }
    bool next(Row& out) override {
      if (i_ == 3) return false;
      out = {make_column(SPORA_DTYPE_F32, {2, i_ == 2 ? 3 : 2})};
      ++i_;
      return true;
    }
   private:
    int64_t i_ = 0;
  };
  NodePtr b = make_batch_node(std::make_unique<Ragged>(), 3, false, {"image"});
  b->reset(0);
  Row r;
  const std::string m = error_of([&] { b->next(r); });
  EXPECT_NE(m.find("[dataset batch] batch 0: column 'image' of row 2 is f32 (2, 3) but row 0 is f32 (2, 2)"),
            std::string::npos) << m;
}

TEST(DataPipeline, WorkerErrorsReachTheCaller) {
  auto s = std::make_shared<SourceData>();
  s->origin = "arrays";
  s->names = {"x"};
  s->rows = 40;
  s->columns.push_back(make_column(SPORA_DTYPE_F32, {40, 2}));
  const DatasetPtr src = make_source(s);
  spora::Attrs oh;
  oh.set("num_classes", spora::AttrValue::of_int(3));
  const std::string m = error_of([&] { collect(make_map(src, {op("one_hot", oh)}, {"x"}, 2, 0)); });
  EXPECT_NE(m.find("[dataset one_hot]"), std::string::npos) << m;
  EXPECT_NE(error_of([&] { make_map(src, {op("hwc2chw")}, {"nope"}, 1, 0); }).find("no column 'nope'"),
            std::string::npos);
}

