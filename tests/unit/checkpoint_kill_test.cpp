// The atomic-commit promise of checkpoints, measured (issue 18 line 4): a
// child process saves checkpoints in a loop and is SIGKILLed at a random
// moment, over and over; after every kill the checkpoint on disk must load
// (CRC-checked) and be exactly the last one the child reported saved (old)
// or the one it was saving (new) — never a mix, never unreadable.
//
//   checkpoint_kill_test [--kills N] [--seed S] [--dir D]
//
// Every checkpoint is distinguishable: it holds its step as an i64 tensor,
// in the metadata, and in every element of a tensor whose length also
// depends on the step, so a file mixing two saves fails the check even when
// each piece passes its CRC. Prints how many kills landed mid-write (a
// temporary file was left behind), after the commit but before the report,
// and elsewhere; exits 1 on the first torn or wrong checkpoint.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "io/checkpoint.h"
#include "runtime/context.h"
#include "support/error.h"

namespace {

using namespace spora;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int64_t kReady = -1;  // the child's first message: about to save

Device* cpu() {
  static Context* ctx = [] {
    auto* c = new Context;
    c->add_plugin_path(SPORA_TEST_PLUGIN_DIR);
    return c;
  }();
  Device* d = ctx->find_device("cpu");
  if (!d) fail(Code::kNotFound, "[checkpoint_kill_test] no cpu device in {}", SPORA_TEST_PLUGIN_DIR);
  return d;
}

// The length of the step-valued tensor: 1..64 Ki elements (up to 256 KiB),
// varying with the step so that saves differ in size and layout.
int64_t payload_len(int64_t step) { return 1 + (step * 7919) % 65536; }

Shape shape1(int64_t n) { return Shape::from(&n, 1, "checkpoint_kill_test"); }

void write_all(int fd, const void* p, size_t n) {
  // 8-byte writes to a pipe are atomic; the loop only covers EINTR.
  while (::write(fd, p, n) < 0 && errno == EINTR) {
  }
}

// Saves steps start+1, start+2, ... to `path` until killed, reporting each
// step on `fd` once save_checkpoint has returned.
int child(const std::string& path, int64_t start, int fd) {
  Device* dev = cpu();
  write_all(fd, &kReady, sizeof kReady);
  for (int64_t step = start + 1;; ++step) {
    std::vector<float> payload(static_cast<size_t>(payload_len(step)), static_cast<float>(step));
    const Tensor w = tensor_from_host(dev, SPORA_DTYPE_F32, shape1(payload_len(step)), payload.data(),
                                      payload.size() * sizeof(float));
    const Tensor s = tensor_from_host(dev, SPORA_DTYPE_I64, Shape{}, &step, sizeof step);
    io::save_checkpoint(path, {"w", "step"}, {&w, &s}, {{"step", std::to_string(step)}});
    write_all(fd, &step, sizeof step);
  }
}

// The step of the checkpoint at `path`, or an error saying how it is torn.
int64_t checked_step(const std::string& path, std::string* why) {
  try {
    io::Checkpoint c(path);
    const Tensor s = c.read("step", cpu());
    int64_t step = 0;
    if (s.nbytes() != sizeof step) {
      *why = "tensor 'step' has " + std::to_string(s.nbytes()) + " bytes";
      return -1;
    }
    tensor_read(s, &step, sizeof step);
    const std::string meta = "{\"step\":\"" + std::to_string(step) + "\"}";
    if (c.metadata_json() != meta) {
      *why = "metadata " + c.metadata_json() + " for step " + std::to_string(step);
      return -1;
    }
    const Tensor w = c.read("w", cpu());
    std::vector<float> got(w.nbytes() / sizeof(float));
    tensor_read(w, got.data(), got.size() * sizeof(float));
    if (static_cast<int64_t>(got.size()) != payload_len(step)) {
      *why = "tensor 'w' has " + std::to_string(got.size()) + " elements for step " + std::to_string(step);
      return -1;
    }
    for (float x : got)
      if (x != static_cast<float>(step)) {
        *why = "tensor 'w' holds " + std::to_string(x) + " in step " + std::to_string(step);
        return -1;
      }
    return step;
  } catch (const std::exception& e) {
    *why = e.what();
    return -1;
  }
}

struct Run {
  pid_t pid = -1;
  int fd = -1;
};

Run spawn(const std::string& self, const std::string& path, int64_t start) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) fail(Code::kIo, "[checkpoint_kill_test] pipe: {}", std::strerror(errno));
  const std::string fd_arg = std::to_string(p[1]), start_arg = std::to_string(start);
  const pid_t pid = ::fork();
  if (pid < 0) fail(Code::kIo, "[checkpoint_kill_test] fork: {}", std::strerror(errno));
  if (pid == 0) {
    ::fcntl(p[1], F_SETFD, 0);  // the write end survives exec
    const char* argv[] = {self.c_str(), "--child", path.c_str(), start_arg.c_str(), fd_arg.c_str(), nullptr};
    ::execv(self.c_str(), const_cast<char* const*>(argv));
    ::_exit(127);
  }
  ::close(p[1]);
  return {pid, p[0]};
}

// Reads the next step the child reported; false at end of stream.
bool next(int fd, int64_t* v) {
  size_t got = 0;
  auto* b = reinterpret_cast<char*>(v);
  while (got < sizeof *v) {
    const ssize_t r = ::read(fd, b + got, sizeof *v - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

int driver(const std::string& self, int kills, uint32_t seed, std::string dir) {
  bool own_dir = false;
  if (dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "spora_ckpt_kill_XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) fail(Code::kIo, "[checkpoint_kill_test] mkdtemp: {}", std::strerror(errno));
    dir = tmpl;
    own_dir = true;
  }
  // The directory this run made goes on every way out.
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup{own_dir ? dir : std::string()};
  const std::string path = dir + "/ckpt.safetensors";
  std::mt19937 rng(seed);

  // Calibration: one child runs until it has saved 20 times; the delay
  // before each kill is then drawn from [0, 3 x one save + a start), so kills
  // land before, during and between saves.
  int64_t step = 0;
  Run r = spawn(self, path, 0);
  int64_t v = 0;
  if (!next(r.fd, &v) || v != kReady) fail(Code::kInternal, "[checkpoint_kill_test] the child did not start");
  const auto t0 = Clock::now();
  while (step < 20 && next(r.fd, &v)) step = v;
  const double save_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 20;
  ::kill(r.pid, SIGKILL);
  ::waitpid(r.pid, nullptr, 0);
  while (next(r.fd, &v)) step = v;
  ::close(r.fd);
  {
    std::string why;
    const int64_t now = checked_step(path, &why);
    if (now != step && now != step + 1) {
      std::fprintf(stderr, "calibration: TORN: last reported step %" PRId64 ", on disk %" PRId64 ": %s\n", step,
                   now, why.c_str());
      return 1;
    }
    step = now;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().rfind("ckpt.safetensors.tmp.", 0) == 0) fs::remove(e.path());
  }
  std::uniform_real_distribution<double> delay_us(0, 3 * save_us);

  int mid_write = 0, after_commit = 0, elsewhere = 0, torn = 0, before_ready = 0;
  const auto start = Clock::now();
  for (int k = 0; k < kills; ++k) {
    std::string why;
    const int64_t on_disk = checked_step(path, &why);
    if (on_disk != step) {
      std::fprintf(stderr, "kill %d: checkpoint before the run is step %" PRId64 ", want %" PRId64 ": %s\n", k,
                   on_disk, step, why.c_str());
      return 1;
    }
    r = spawn(self, path, step);
    // Three kills in four wait for the child to be saving; the others may
    // hit it while it starts, when the old file must simply stay.
    const bool wait_ready = (rng() & 3) != 0;
    bool ready = false;
    if (wait_ready) ready = next(r.fd, &v) && v == kReady;
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(delay_us(rng))));
    ::kill(r.pid, SIGKILL);
    int status = 0;
    ::waitpid(r.pid, &status, 0);
    int64_t reported = step;
    while (next(r.fd, &v)) {
      if (v == kReady)
        ready = true;
      else
        reported = v;
    }
    ::close(r.fd);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
      std::fprintf(stderr, "kill %d: the child ended by itself (status %d)\n", k, status);
      return 1;
    }
    if (!ready) ++before_ready;

    bool temp_left = false;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().rfind("ckpt.safetensors.tmp.", 0) == 0) {
        temp_left = true;
        fs::remove(e.path());
      }
    const int64_t now = checked_step(path, &why);
    if (now < 0 || (now != reported && now != reported + 1)) {
      ++torn;
      std::fprintf(stderr, "kill %d: TORN: last reported step %" PRId64 ", on disk %" PRId64 ": %s\n", k, reported,
                   now, why.c_str());
      break;
    }
    if (temp_left)
      ++mid_write;
    else if (now == reported + 1)
      ++after_commit;
    else
      ++elsewhere;
    step = now;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "checkpoint_kill_test: %d kills in %.1f s (seed %u, one save ~%.0f us in %s); %d mid-write (temporary "
      "file left), %d after the commit before the report, %d elsewhere (%d before the child was ready); "
      "%d torn; last step %" PRId64 "\n",
      mid_write + after_commit + elsewhere + torn, secs, seed, save_us, dir.c_str(), mid_write, after_commit,
      elsewhere, before_ready, torn, step);
  if (torn) return 1;
  // Kills that never hit a save would measure nothing.
  if (kills >= 100 && mid_write == 0) {
    std::fprintf(stderr, "no kill landed mid-write: the test measured nothing\n");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 5 && std::strcmp(argv[1], "--child") == 0)
      return child(argv[2], std::strtoll(argv[3], nullptr, 10), std::atoi(argv[4]));
    int kills = 1000;
    uint32_t seed = static_cast<uint32_t>(std::random_device{}());
    std::string dir;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--kills" && i + 1 < argc)
        kills = std::atoi(argv[++i]);
      else if (a == "--seed" && i + 1 < argc)
        seed = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
      else if (a == "--dir" && i + 1 < argc)
        dir = argv[++i];
      else {
        std::fprintf(stderr, "usage: %s [--kills N] [--seed S] [--dir D]\n", argv[0]);
        return 2;
      }
    }
    if (kills < 1) {
      std::fprintf(stderr, "--kills must be at least 1\n");
      return 2;
    }
    return driver("/proc/self/exe", kills, seed, dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_kill_test: %s\n", e.what());
    return 1;
  }
}
