// spora.hpp's data pipeline classes (Dataset, Transform, DatasetIterator)
// through the public C API only.
#include <gtest/gtest.h>
#include <spora/spora.hpp>

#include <algorithm>
#include <filesystem>

namespace fs = std::filesystem;

// spora.hpp's Dataset over the C API, on Debian's Fashion-MNIST test split
// when the package is installed (the install script installs it).
TEST(DataHpp, FashionMnistTestSplit) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  if (!fs::exists(dir + "t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  spora::Context ctx;
  spora_device_t* dev = nullptr;
  spora::check(spora_device_find(ctx.get(), "cpu", &dev));
  spora::Attrs r;
  r.set("rescale", 1.0 / 255);
  const spora::Dataset d =
      spora::Dataset::from_idx({dir + "t10k-images-idx3-ubyte.gz", dir + "t10k-labels-idx1-ubyte.gz"},
                               {"image", "label"}, {SPORA_DTYPE_INVALID, SPORA_DTYPE_I32})
          .map({spora::Transform("rescale", &r), spora::Transform("hwc2chw")}, {"image"}, 2)
          .batch(1000);
  EXPECT_EQ(d.size(), 10);
  EXPECT_EQ(d.column_names(), (std::vector<std::string>{"image", "label"}));
  spora::DatasetIterator it = d.iterate(spora::Device(dev));
  std::vector<spora::Tensor> row;
  int batches = 0;
  std::vector<int64_t> counts(10, 0);
  while (it.next(row)) {
    ASSERT_EQ(row.size(), 2u);
    int64_t dims[4];
    spora::check(spora_tensor_shape(row[0].get(), dims, 4));
    EXPECT_EQ(dims[0], 1000);
    EXPECT_EQ(dims[1], 1);
    EXPECT_EQ(dims[2], 28);
    std::vector<int32_t> labels(1000);
    spora::check(spora_tensor_read(row[1].get(), labels.data(), labels.size() * 4));
    for (int32_t l : labels) counts[static_cast<size_t>(l)]++;
    ++batches;
  }
  EXPECT_EQ(batches, 10);
  for (int64_t c : counts) EXPECT_EQ(c, 1000);  // the test split is balanced
}

// The same split through the device queue of sim (batches copied ahead on
// its copy stream), every depth giving the same batches.
TEST(DataHpp, DeviceQueueOnSimGivesTheSameBatches) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  if (!fs::exists(dir + "t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  spora::Context ctx;
  spora_device_t* sim = nullptr;
  if (spora_device_find(ctx.get(), "sim", &sim) != SPORA_OK) GTEST_SKIP() << "no sim device";
  const spora::Dataset d = spora::Dataset::from_idx({dir + "t10k-images-idx3-ubyte.gz", dir + "t10k-labels-idx1-ubyte.gz"},
                                                    {"image", "label"}, {SPORA_DTYPE_INVALID, SPORA_DTYPE_I32})
                               .batch(2500);
  std::vector<std::vector<uint8_t>> first;
  for (int32_t depth : {0, 1, 3}) {
    spora::DatasetIterator it = d.iterate(spora::Device(sim));
    it.device_queue(depth);
    std::vector<spora::Tensor> row;
    std::vector<std::vector<uint8_t>> images;
    while (it.next(row)) {
      std::vector<uint8_t> px(2500 * 28 * 28);
      spora::check(spora_tensor_read(row[0].get(), px.data(), px.size()));
      images.push_back(std::move(px));
    }
    EXPECT_EQ(images.size(), 4u) << "depth " << depth;
    if (first.empty()) first = images;
    EXPECT_TRUE(images == first) << "depth " << depth;
    EXPECT_THROW(it.device_queue(2), spora::Error);  // after the first row
  }
}

// spora::DeviceQueue over spora_device_queue_*: batches come out first in,
// first out with the values pushed, though the caller overwrites its host
// buffers right after each push; pending() counts; cpu has no queue.
TEST(DataHpp, DeviceQueueWrapperKeepsOrderAndValues) {
  spora::Context ctx;
  spora_device_t* sim = nullptr;
  if (spora_device_find(ctx.get(), "sim", &sim) != SPORA_OK) GTEST_SKIP() << "no sim device";
  spora::DeviceQueue q{spora::Device(sim)};
  ASSERT_TRUE(q.enabled());
  EXPECT_THROW(q.pop(), spora::Error);  // nothing pushed
  std::vector<float> x(6);
  std::vector<int32_t> y(2);
  for (int b = 0; b < 3; ++b) {
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(100 * b) + static_cast<float>(i);
    y = {b, -b};
    q.push({spora::DeviceQueue::Column::of({2, 3}, x), spora::DeviceQueue::Column::of({2}, y)});
    std::fill(x.begin(), x.end(), -1.0f);  // the queue read them already
  }
  EXPECT_EQ(q.pending(), 3u);
  for (int b = 0; b < 3; ++b) {
    std::vector<spora::Tensor> row = q.pop();
    ASSERT_EQ(row.size(), 2u);
    const std::vector<float> got = row[0].read<float>();
    ASSERT_EQ(got.size(), 6u);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], static_cast<float>(100 * b) + static_cast<float>(i));
    EXPECT_EQ(row[1].read<int32_t>(), (std::vector<int32_t>{b, -b}));
  }
  EXPECT_EQ(q.pending(), 0u);
  // A column whose bytes do not fit its shape is refused, and nothing is queued.
  EXPECT_THROW(q.push({spora::DeviceQueue::Column{SPORA_DTYPE_F32, {4}, x.data(), 3 * sizeof(float)}}), spora::Error);
  EXPECT_EQ(q.pending(), 0u);

  spora_device_t* cpu = nullptr;
  ASSERT_EQ(spora_device_find(ctx.get(), "cpu", &cpu), SPORA_OK);
  spora::DeviceQueue none{spora::Device(cpu)};
  EXPECT_FALSE(none.enabled());
  EXPECT_THROW(none.push({}), spora::Error);
  EXPECT_EQ(none.pending(), 0u);
}
