// Checkpoint save and load through the C API next to their anchor: the same
// bytes written with write() + fsync() + rename and read back with read()
// (what any checkpoint costs at least). Spora adds the device copies, the
// CRC-32C of every tensor and the header.
//
//   bench_checkpoint_io [MiB total, default 256] [tensors, default 32]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <spora/spora.hpp>
#include <string>
#include <vector>

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void raw_write(const std::string& path, const std::vector<std::vector<float>>& data) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (const auto& d : data)
    if (::write(fd, d.data(), d.size() * 4) != static_cast<ssize_t>(d.size() * 4)) std::abort();
  ::fsync(fd);
  ::close(fd);
  ::rename(tmp.c_str(), path.c_str());
}

void raw_read(const std::string& path, std::vector<std::vector<float>>& data) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  for (auto& d : data)
    if (::read(fd, d.data(), d.size() * 4) != static_cast<ssize_t>(d.size() * 4)) std::abort();
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  const size_t count = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 32;
  const size_t per = mib * 1024 * 1024 / 4 / count;
  spora::Context ctx;
  spora::Device cpu = ctx.device("cpu");
  std::vector<std::vector<float>> host(count, std::vector<float>(per));
  for (size_t i = 0; i < count; ++i)
    for (size_t k = 0; k < per; ++k) host[i][k] = static_cast<float>(i * 31 + k % 1000) * 0.001f;
  std::vector<spora::Tensor> ts;
  std::vector<std::string> names;
  for (size_t i = 0; i < count; ++i) {
    ts.push_back(spora::Tensor::from<float>(cpu, {static_cast<int64_t>(per)}, host[i]));
    names.push_back("layer" + std::to_string(i) + ".weight");
  }
  std::vector<std::pair<std::string, const spora::Tensor*>> named;
  for (size_t i = 0; i < count; ++i) named.emplace_back(names[i], &ts[i]);
  const char* dir = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  const std::string ck = std::string(dir) + "/spora_bench.ckpt", raw = std::string(dir) + "/spora_bench.raw";

  const int reps = 3;
  double best_save = 1e9, best_load = 1e9, best_raw_w = 1e9, best_raw_r = 1e9;
  for (int r = 0; r < reps; ++r) {
    double t0 = now();
    spora::save_checkpoint(ck, named);
    best_save = std::min(best_save, now() - t0);
    t0 = now();
    {
      spora::Checkpoint c(ck);
      for (const auto& n : names) (void)c.read(n, cpu);
    }
    best_load = std::min(best_load, now() - t0);
    t0 = now();
    raw_write(raw, host);
    best_raw_w = std::min(best_raw_w, now() - t0);
    t0 = now();
    raw_read(raw, host);
    best_raw_r = std::min(best_raw_r, now() - t0);
  }
  std::remove(ck.c_str());
  std::remove(raw.c_str());
  const double mb = static_cast<double>(per * count * 4) / 1e6;
  std::printf("checkpoint of %zu f32 tensors, %.0f MB, best of %d (file cache warm for loads)\n", count, mb, reps);
  std::printf("%-28s %10s %10s %8s\n", "", "spora MB/s", "raw MB/s", "ratio");
  std::printf("%-28s %10.0f %10.0f %8.2f\n", "save (write+fsync+rename)", mb / best_save, mb / best_raw_w,
              best_raw_w / best_save);
  std::printf("%-28s %10.0f %10.0f %8.2f\n", "load (read, CRC, to device)", mb / best_load, mb / best_raw_r,
              best_raw_r / best_load);
  return 0;
}
