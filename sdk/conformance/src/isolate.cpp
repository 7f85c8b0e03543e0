#include "isolate.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>

namespace spora::conformance {

void Channel::send(const nlohmann::json& j) {
  // Replace invalid UTF-8 (a plugin's message may hold anything) instead of
  // throwing.
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone: nothing left to tell
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void Channel::begin(const std::string& what, int64_t item) { send({{"begin", what}, {"item", item}}); }

void Channel::case_result(const CaseResult& r) {
  send({{"case", r.id},
        {"op", r.op},
        {"dtype", r.dtype},
        {"gradient", r.gradient},
        {"status", status_name(r.status)},
        {"detail", r.detail}});
}

void Channel::result(const std::string& part, const std::string& name, Status status, const std::string& detail) {
  send({{"part", part}, {"name", name}, {"status", status_name(status)}, {"detail", detail}});
}

void Channel::fact(const std::string& key, const nlohmann::json& value) { send({{"fact", key}, {"value", value}}); }

namespace {

// Splits complete lines off `buf` and records them.
void take_lines(std::string& buf, ChildOutcome& out) {
  size_t nl;
  while ((nl = buf.find('\n')) != std::string::npos) {
    const std::string line = buf.substr(0, nl);
    buf.erase(0, nl + 1);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    if (j.contains("begin") && j["begin"].is_string()) {
      out.last_begun = j["begin"].get<std::string>();
      out.last_item = j.value("item", int64_t{-1});
    } else if (j.contains("case") && j["case"].is_string()) {
      out.cases.push_back({j["case"].get<std::string>(), j.value("op", ""), j.value("dtype", ""),
                           j.value("gradient", false), status_from_name(j.value("status", "")),
                           j.value("detail", "")});
    } else if (j.contains("fact") && j["fact"].is_string()) {
      out.facts[j["fact"].get<std::string>()] = j.value("value", nlohmann::json());
    } else if (j.contains("name")) {
      out.results.push_back({j.value("part", ""), j.value("name", ""), status_from_name(j.value("status", "")),
                             j.value("detail", "")});
    } else if (j.contains("done")) {
      out.finished = true;
    }
  }
}

}  // namespace

ChildOutcome run_child(const std::function<void(Channel&)>& body, double timeout_s) {
  ChildOutcome out;
  int report[2], output[2];
  if (::pipe(report) != 0) {
    out.death = std::string("cannot create a pipe: ") + std::strerror(errno);
    return out;
  }
  if (::pipe(output) != 0) {
    out.death = std::string("cannot create a pipe: ") + std::strerror(errno);
    ::close(report[0]);
    ::close(report[1]);
    return out;
  }
  std::fflush(nullptr);  // or the child would repeat the parent's buffered output
  const pid_t pid = ::fork();
  if (pid < 0) {
    out.death = std::string("fork failed: ") + std::strerror(errno);
    for (int fd : {report[0], report[1], output[0], output[1]}) ::close(fd);
    return out;
  }
  if (pid == 0) {
    // The parent names a crash by the signal that killed the child; a
    // handler inherited from the host would turn it into something else
    // (AddressSanitizer's reports and exits with status 1).
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
    ::close(report[0]);
    ::close(output[0]);
    ::dup2(output[1], STDOUT_FILENO);
    ::dup2(output[1], STDERR_FILENO);
    ::close(output[1]);
    Channel ch(report[1]);
    int status = 0;
    try {
      body(ch);
      std::fflush(nullptr);
      const std::string done = "{\"done\":true}\n";
      if (::write(report[1], done.data(), done.size()) < 0) status = 4;
    } catch (const std::exception& e) {
      ch.result("kit", "internal error in the conformance kit", Status::kFail, e.what());
      status = 3;
    } catch (...) {
      status = 3;
    }
    // No static destructors or atexit handlers: the plugin's threads may
    // still run, and the parent owns the terminal.
    ::_exit(status);
  }
  ::close(report[1]);
  ::close(output[1]);

  const auto limit = std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
  auto deadline = std::chrono::steady_clock::now() + limit;
  std::string buf;
  bool report_open = true, output_open = true, timed_out = false;
  char chunk[4096];
  while (report_open || output_open) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      timed_out = true;
      break;
    }
    const int wait_ms =
        static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count()) + 1;
    pollfd fds[2] = {{report_open ? report[0] : -1, POLLIN, 0}, {output_open ? output[0] : -1, POLLIN, 0}};
    const int r = ::poll(fds, 2, wait_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    if (fds[0].revents) {
      const ssize_t n = ::read(report[0], chunk, sizeof chunk);
      if (n > 0) {
        buf.append(chunk, static_cast<size_t>(n));
        take_lines(buf, out);
        deadline = std::chrono::steady_clock::now() + limit;  // progress
      } else if (n == 0 || errno != EINTR) {
        report_open = false;
      }
    }
    if (fds[1].revents) {
      const ssize_t n = ::read(output[0], chunk, sizeof chunk);
      if (n > 0) {
        if (out.output.size() < 64 * 1024) out.output.append(chunk, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        output_open = false;
      }
    }
  }
  ::close(report[0]);
  ::close(output[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    out.death = "made no progress for " + std::to_string(static_cast<int>(timeout_s)) + " s (hung?)";
    out.finished = false;
  } else if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    out.death = "crashed: killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
    out.finished = false;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
    out.death = "stopped the checks with an exception (reported above)";
    out.finished = false;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    out.death = "exited with status " + std::to_string(WEXITSTATUS(status)) + " (a plugin called exit?)";
    out.finished = false;
  } else if (!out.finished) {
    out.death = "exited before finishing (a plugin called exit(0)?)";
  }
  return out;
}

}  // namespace spora::conformance
