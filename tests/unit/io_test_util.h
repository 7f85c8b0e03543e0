// Helpers for the tests of model and checkpoint files: devices, temporary
// directories, raw files, and a count of the largest heap allocation (the
// test binaries replace operator new, io_alloc_tracker.cpp).
#pragma once
#include <gtest/gtest.h>

#include <spora/spora.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "abi/abi.h"
#include "runtime/context.h"
#include "runtime/device.h"

namespace spora::iotest {

inline Device* device(const std::string& name) {
  static Context* ctx = [] {
    auto* c = new Context;
    c->add_plugin_path(SPORA_TEST_PLUGIN_DIR);  // no libspora.so here to find plugins beside
    return c;
  }();
  return ctx->find_device(name);
}
inline spora_device_t* handle(Device* d) { return abi::to_handle(d); }

// A fresh directory, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "spora_io_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  // Names of the files in the directory.
  std::vector<std::string> list() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_)) out.push_back(e.path().filename().string());
    return out;
  }

 private:
  std::string path_;
};

inline std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
inline void spit(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors-shaped file: the 8-byte length (`len`, or the header's
// size), the header text, then `data` zero bytes.
inline void raw_file(const std::string& path, const std::string& header, size_t data,
                     uint64_t len = UINT64_MAX) {
  if (len == UINT64_MAX) len = header.size();
  std::vector<uint8_t> b(8);
  for (int i = 0; i < 8; ++i) b[static_cast<size_t>(i)] = static_cast<uint8_t>(len >> (8 * i));
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data, 0);
  spit(path, b);
}

// The largest single operator-new request since the last reset.
size_t max_allocation();
void reset_max_allocation();

}  // namespace spora::iotest
