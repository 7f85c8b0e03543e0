#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "support/error.h"

namespace spora::io {
namespace {

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

[[noreturn]] void io_fail(const char* what, const std::string& file, int err) {
  fail(Code::kIo, "[file] cannot {} '{}': {}", what, file, std::strerror(err));
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) fail(Code::kInvalidArgument, "[file] empty path");
  // The pid keeps processes apart; the counter keeps threads of one process
  // apart when they save to the same path at once.
  static std::atomic<uint64_t> seq{0};
  temp_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(seq++);
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) io_fail("create", temp_, errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write_at(uint64_t offset, const void* data, size_t n) {
  if (fd_ < 0) fail(Code::kInternal, "[file] write to '{}' after commit", temp_);
  const auto* p = static_cast<const char*>(data);
  while (n) {
    const ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      io_fail("write", temp_, errno);
    }
    if (w == 0) io_fail("write", temp_, EIO);
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) fail(Code::kInternal, "[file] '{}' committed twice", temp_);
  if (::fsync(fd_) != 0) io_fail("flush", temp_, errno);
  const int fd = fd_;
  fd_ = -1;
  // close() can report a deferred write error (NFS): the data is not safe.
  if (::close(fd) != 0) io_fail("close", temp_, errno);
  if (::rename(temp_.c_str(), path_.c_str()) != 0) io_fail("rename onto", path_, errno);
  committed_ = true;
  // Make the rename itself durable. Some file systems cannot fsync a
  // directory (EINVAL); the rename has happened, so that is not an error.
  const std::string dir = dir_of(path_);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) io_fail("open directory", dir, errno);
  const int rc = ::fsync(dfd), err = errno;
  ::close(dfd);
  if (rc != 0 && err != EINVAL && err != ENOTSUP) io_fail("flush directory", dir, err);
}

}  // namespace spora::io
