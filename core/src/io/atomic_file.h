// Atomic replacement of a file: the new contents go to a temporary file
// beside the target (<path>.tmp.<pid>.<n>), which is fsynced, renamed over
// the target, and the directory fsynced. Until commit() returns the target
// is untouched; if anything fails (or the object is destroyed before
// commit) the temporary file is removed. Readers see either the old file or
// the complete new one, never a mix, even across a crash.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace spora::io {

class AtomicFile {
 public:
  // Creates the temporary file; errors (Code::kIo) name it and the cause.
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Writes all of `data` at byte `offset` of the new file.
  void write_at(uint64_t offset, const void* data, size_t n);
  // fsync, close, rename over the target, fsync the directory.
  void commit();

  const std::string& temp_path() const { return temp_; }

 private:
  std::string path_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace spora::io
