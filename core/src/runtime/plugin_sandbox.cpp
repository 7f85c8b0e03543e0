#include "runtime/plugin_sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>

extern char** environ;

namespace spora {
namespace {

using Clock = std::chrono::steady_clock;

// Enough to overlap the children's dlopen waits on a few cores without
// flooding a machine that has many candidates.
constexpr size_t kMaxChildren = 8;

struct Child {
  size_t index = 0;
  pid_t pid = -1;
  int fd = -1;  // read end of the report pipe; -1 once at end of file
  std::string report;
  Clock::time_point deadline;
  bool running = false;
  bool timed_out = false;
  bool status_known = true;
  int status = 0;
};

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGPIPE: return "SIGPIPE";
    case SIGINT: return "SIGINT";
    case SIGALRM: return "SIGALRM";
    default: return "signal " + std::to_string(sig);
  }
}

std::string stage_words(const std::string& stage) {
  if (stage == "constructor") return "the constructor (dlopen)";
  if (stage == "probe") return "spora_plugin_probe_v1";
  if (stage == "entry") return "spora_plugin_entry_v1";
  return "the handshake";
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// A descriptor at 10 or above: the child's report descriptor is 3, and
// dup2 onto itself would leave close-on-exec set.
int high_fd(int fd) {
  if (fd >= 10) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  close(fd);
  return moved;
}

bool start(const std::string& helper, const std::string& file, Child* c, std::string* why) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return *why = std::string("pipe: ") + std::strerror(errno), false;
  const int r = high_fd(p[0]), w = high_fd(p[1]);
  if (r < 0 || w < 0) {
    if (r >= 0) close(r);
    if (w >= 0) close(w);
    return *why = std::string("fcntl: ") + std::strerror(errno), false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, w, 3);
  // The plugin's stdout must not mix into the host program's output.
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  // Its own process group, so a timeout kills whatever it started too;
  // default signal dispositions and no blocked signals (the host's may be
  // anything, e.g. Python ignores SIGPIPE).
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &all);
  const std::string parent = std::to_string(getpid());
  std::vector<char*> argv = {const_cast<char*>(helper.c_str()), const_cast<char*>(file.c_str()),
                             const_cast<char*>(parent.c_str()), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, helper.c_str(), &fa, &at, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(w);
  if (rc != 0) {
    close(r);
    return *why = "cannot start " + helper + ": " + std::strerror(rc), false;
  }
  fcntl(r, F_SETFL, fcntl(r, F_GETFL) | O_NONBLOCK);
  c->pid = pid;
  c->fd = r;
  c->running = true;
  return true;
}

// Reads what is there; closes the descriptor at end of file.
void drain(Child* c) {
  char buf[4096];
  while (c->fd >= 0) {
    const ssize_t n = read(c->fd, buf, sizeof buf);
    if (n > 0) {
      if (c->report.size() < (1u << 16)) c->report.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      close(c->fd);
      c->fd = -1;
    } else if (errno != EINTR) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        close(c->fd);
        c->fd = -1;
      }
      return;
    }
  }
}

void reaped(Child* c, int status, bool known) {
  c->running = false;
  c->status = status;
  c->status_known = known;
  drain(c);
  if (c->fd >= 0) {  // a grandchild may hold the pipe open: stop listening
    close(c->fd);
    c->fd = -1;
  }
}

SandboxVerdict judge(const Child& c, double timeout_s) {
  SandboxVerdict v;
  std::string stage;
  bool done = false;
  std::istringstream lines(c.report);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("stage ", 0) == 0) {
      stage = line.substr(6);
    } else if (line == "done") {
      done = true;
    } else if (line.rfind("probe ", 0) == 0 || line.rfind("entry", 0) == 0 || line.rfind("dlopen-failed", 0) == 0) {
      v.seen += (v.seen.empty() ? "" : "; ") + line;
    }
  }
  using O = SandboxVerdict::Outcome;
  if (c.timed_out) {
    v.outcome = O::kDied;
    v.timed_out = true;
    v.reason = "timed out after " + seconds(timeout_s) + " s in " + stage_words(stage);
  } else if (!c.status_known) {
    // The host ignores SIGCHLD, so the kernel reaped the child: how it ended
    // is lost, but not whether it finished.
    v.outcome = done ? O::kSurvived : stage.empty() ? O::kNotChecked : O::kDied;
    if (!done)
      v.reason = stage.empty() ? "the probe helper ended before opening the plugin"
                               : "ended in " + stage_words(stage) + " (how is unknown: this program ignores SIGCHLD)";
  } else if (WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0 && done) {
    v.outcome = O::kSurvived;
  } else if (stage.empty()) {
    // Died before it opened the plugin: the helper's problem, not the plugin's.
    v.outcome = O::kNotChecked;
    v.reason = WIFSIGNALED(c.status) ? "the probe helper was killed by " + signal_name(WTERMSIG(c.status))
                                     : "the probe helper exited with status " + std::to_string(WEXITSTATUS(c.status));
  } else {
    v.outcome = O::kDied;
    const std::string where = done ? "its exit, after the handshake" : stage_words(stage);
    v.reason = WIFSIGNALED(c.status) ? "killed by " + signal_name(WTERMSIG(c.status)) + " in " + where
                                     : "exited with status " + std::to_string(WEXITSTATUS(c.status)) + " in " + where;
  }
  return v;
}

}  // namespace

std::vector<SandboxVerdict> run_probe_children(const std::string& helper, const std::vector<std::string>& files,
                                               double timeout_s) {
  std::vector<SandboxVerdict> out(files.size());
  std::vector<Child> kids(files.size());
  const auto budget = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  size_t next = 0, running = 0;
  for (;;) {
    while (running < kMaxChildren && next < files.size()) {
      Child& c = kids[next];
      c.index = next;
      std::string why;
      if (start(helper, files[next], &c, &why)) {
        c.deadline = Clock::now() + budget;
        ++running;
      } else {
        out[next].reason = why;  // kNotChecked
      }
      ++next;
    }
    if (running == 0) break;

    // Wake on report lines and ends of file; look at exits and deadlines at
    // least every 50 ms (a child whose pipe is held by a grandchild gives no
    // end of file), every millisecond once a child has closed its pipe.
    std::vector<pollfd> fds;
    std::vector<Child*> owners;
    auto now = Clock::now();
    auto wait = std::chrono::milliseconds(50);
    for (Child& c : kids) {
      if (!c.running) continue;
      if (c.fd >= 0) {
        fds.push_back({c.fd, POLLIN, 0});
        owners.push_back(&c);
      } else {
        wait = std::chrono::milliseconds(1);
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now);
      wait = std::max(std::chrono::milliseconds(0), std::min(wait, left + std::chrono::milliseconds(1)));
    }
    const int n = poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
    if (n > 0)
      for (size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents) drain(owners[i]);

    now = Clock::now();
    for (Child& c : kids) {
      if (!c.running) continue;
      // Peek first (WNOWAIT): while the child is an unreaped zombie its
      // process group id stays reserved, so killing the group then cannot
      // hit anyone else; it ends whatever the plugin started.
      siginfo_t info{};
      const int r = waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED | WNOHANG | WNOWAIT);
      const bool exited = r == 0 && info.si_pid == c.pid;
      if (r < 0 && errno == ECHILD) {
        reaped(&c, 0, false);  // the host ignores SIGCHLD: the kernel reaped it
      } else if (exited || now >= c.deadline) {
        kill(-c.pid, SIGKILL);
        if (!exited) kill(c.pid, SIGKILL);
        int status = 0;
        while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
        }
        c.timed_out = !exited;
        reaped(&c, status, true);
      }
      if (!c.running) --running;
    }
  }
  for (size_t i = 0; i < kids.size(); ++i)
    if (kids[i].pid > 0) out[i] = judge(kids[i], timeout_s);
  return out;
}

}  // namespace spora
