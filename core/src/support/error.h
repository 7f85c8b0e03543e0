// Errors inside the core: C++ exceptions carrying a status code. They are
// stopped and turned into spora_status_t in exactly one place (src/abi).
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace spora {

// Mirrors the SPORA_ERROR_* codes of spora.h.
enum class Code : int {
  kOk = 0,
  kInvalidArgument = 1,
  kNotFound = 2,
  kUnavailable = 3,
  kUnimplemented = 4,
  kOutOfMemory = 5,
  kTimeout = 6,
  kAborted = 7,
  kInternal = 8,
  kIo = 9,
};

class Error : public std::runtime_error {
 public:
  Error(Code code, std::string message) : std::runtime_error(std::move(message)), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

template <class... Args>
[[noreturn]] void fail(Code code, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(code, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace spora
