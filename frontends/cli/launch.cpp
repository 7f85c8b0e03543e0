// spora launch: starts N ranks of a training script over Open MPI's mpirun
// (docs/parallel.md, "Launching"). Each rank runs through this same tool in
// worker mode, which sets the rank's environment, prefixes every line the
// rank prints with "[rank r] ", and records how it ended; the launcher then
// names the first rank that failed and exits with its code.
//
//   spora launch -n 4 [--hosts a:2,b:2] [--mpirun PATH] [--keep-going] -- python train.py ...
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"

namespace spora::cli {
namespace {

void launch_usage(FILE* f) {
  std::fprintf(f,
               "usage: spora launch -n N [--hosts H1:SLOTS,H2:SLOTS] [--mpirun PATH] -- PROGRAM [ARGS...]\n"
               "\n"
               "Starts N ranks of PROGRAM over Open MPI's mpirun (more ranks than cores are allowed on one\n"
               "host). Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (and Open MPI's own\n"
               "variables, which spora.communication.init() reads), SPORA_NUM_THREADS = cores / ranks on\n"
               "its host unless set, and OMP_WAIT_POLICY=passive when ranks outnumber cores. Every line a\n"
               "rank prints is prefixed with \"[rank R] \". The exit status is 0 when every rank succeeded,\n"
               "else the first failing rank's (128 + signal if it was killed), named on stderr.\n"
               "Slurm: srun -n N spora launch --worker -- PROGRAM ... gives the same per-rank setup.\n");
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "spora";
  buf[n] = '\0';
  return buf;
}

const char* env_or(const char* a, const char* b) {
  const char* v = std::getenv(a);
  return v ? v : std::getenv(b);
}

// Copies complete lines from `fd` to `out` with `prefix`; keeps a partial
// last line in `pending` until it completes (or the pipe closes).
bool pump(int fd, FILE* out, const std::string& prefix, std::string& pending) {
  char buf[8192];
  const ssize_t n = read(fd, buf, sizeof buf);
  if (n <= 0) {
    if (!pending.empty()) std::fprintf(out, "%s%s\n", prefix.c_str(), pending.c_str());
    pending.clear();
    std::fflush(out);
    return false;
  }
  pending.append(buf, static_cast<size_t>(n));
  size_t start = 0;
  for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1)
    std::fprintf(out, "%s%.*s\n", prefix.c_str(), static_cast<int>(nl - start), pending.data() + start);
  pending.erase(0, start);
  std::fflush(out);
  return true;
}

struct Failure {
  int64_t t = 0;
  int rank = -1, code = 0;
  std::string how;
};

// The first rank that failed, from the workers' status files in `dir`
// (removed with the directory when `consume`).
Failure first_failure(const std::string& dir, bool consume) {
  Failure first;
  DIR* d = opendir(dir.c_str());
  if (!d) return first;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "rank-", 5) != 0) continue;
    std::ifstream f(dir + "/" + e->d_name);
    Failure x;
    x.rank = std::atoi(e->d_name + 5);
    f >> x.t >> x.code;
    std::getline(f, x.how);
    if (!x.how.empty() && x.how[0] == ' ') x.how.erase(0, 1);
    if (f && (first.rank < 0 || x.t < first.t)) first = x;
    if (consume) std::remove((dir + "/" + e->d_name).c_str());
  }
  closedir(d);
  if (consume) rmdir(dir.c_str());
  return first;
}

volatile sig_atomic_t g_stop = 0;  // the launcher (mpirun) is stopping this rank
volatile pid_t g_child = 0;
// mpirun sends SIGKILL soon after SIGTERM: stop the program at once (its
// busy ranks would otherwise keep this worker off the CPU past that), and
// let the loop say why.
void on_stop(int) {
  g_stop = 1;
  if (g_child > 0) kill(-g_child, SIGKILL);
}

// Worker mode: this process is one rank started by mpirun (or srun).
int worker(char** cmd) {
  const char* r = env_or("OMPI_COMM_WORLD_RANK", "SLURM_PROCID");
  const char* s = env_or("OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS");
  const char* lr = env_or("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID");
  const char* ls = env_or("OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE");
  const int rank = r ? std::atoi(r) : 0;
  const int local_size = ls ? std::max(1, std::atoi(ls)) : 1;
  setenv("RANK", r ? r : "0", 1);
  setenv("WORLD_SIZE", s ? s : "1", 1);
  setenv("LOCAL_RANK", lr ? lr : "0", 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(local_size).c_str(), 1);
  const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  setenv("SPORA_NUM_THREADS", std::to_string(std::max(1L, cores / local_size)).c_str(), 0);
  if (local_size > cores) setenv("OMP_WAIT_POLICY", "passive", 0);
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) {
    std::fprintf(stderr, "[spora launch] rank %d: pipe: %s\n", rank, std::strerror(errno));
    return 1;
  }
  const pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "[spora launch] rank %d: fork: %s\n", rank, std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive this worker
    setpgid(0, 0);                     // mpirun's signals reach the worker, which decides
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    close(out_pipe[1]);
    close(err_pipe[1]);
    execvp(cmd[0], cmd);
    std::fprintf(stderr, "cannot run '%s': %s\n", cmd[0], std::strerror(errno));
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  g_child = child;
  // mpirun stops a job by signalling its processes (SIGTERM, then SIGKILL
  // a moment later): say why at once, then stop the program.
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) signal(sig, on_stop);
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  std::string pend_out, pend_err;
  bool open_out = true, open_err = true;
  const char* dir = std::getenv("SPORA_LAUNCH_DIR");
  while (open_out || open_err) {
    if (g_stop) {
      std::string because;
      if (dir) {
        const Failure other = first_failure(dir, false);
        if (other.rank >= 0 && other.rank != rank)
          because = ": rank " + std::to_string(other.rank) + " was lost first (it " + other.how + ")";
      }
      std::fprintf(stderr, "[spora launch] rank %d stopped by the launcher%s\n", rank, because.c_str());
      std::fflush(stderr);
      kill(-child, SIGKILL);
      int st = 0;
      while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
      }
      return 128 + SIGTERM;
    }
    pollfd fds[2] = {{open_out ? out_pipe[0] : -1, POLLIN, 0}, {open_err ? err_pipe[0] : -1, POLLIN, 0}};
    if (poll(fds, 2, 200) < 0 && errno != EINTR) break;
    if (open_out && (fds[0].revents & (POLLIN | POLLHUP))) open_out = pump(out_pipe[0], stdout, prefix, pend_out);
    if (open_err && (fds[1].revents & (POLLIN | POLLHUP))) open_err = pump(err_pipe[0], stderr, prefix, pend_err);
    if (getppid() == 1) kill(child, SIGTERM);  // mpirun is gone
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  int code = 0;
  std::string how;
  if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
    how = "exited with code " + std::to_string(code);
  } else if (WIFSIGNALED(status)) {
    code = 128 + WTERMSIG(status);
    how = std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
          strsignal(WTERMSIG(status)) + ")";
  }
  if (code != 0) {
    // Failed on its own (a rank stopped by the launcher returned above),
    // perhaps because another rank was lost first: name that rank too.
    std::string because;
    if (dir) {
      const Failure other = first_failure(dir, false);
      if (other.rank >= 0 && other.rank != rank)
        because = "; rank " + std::to_string(other.rank) + " was lost first (it " + other.how + ")";
    }
    std::fprintf(stderr, "[spora launch] rank %d %s%s\n", rank, how.c_str(), because.c_str());
    if (dir) {
      std::ofstream f(std::string(dir) + "/rank-" + std::to_string(rank));
      f << now_ns() << " " << code << " " << how << "\n";
    }
  }
  return code;
}

// A TCP port nobody listens on now (the kernel picks it).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t n = sizeof a;
  int port = 29500;  // PyTorch's default, if the kernel will not say
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

pid_t g_mpirun = 0;
void forward(int sig) {
  if (g_mpirun > 0) kill(g_mpirun, sig);
}

}  // namespace

int launch(int argc, char** argv) {
  int n = 0;
  std::string hosts, mpirun = std::getenv("SPORA_MPIRUN") ? std::getenv("SPORA_MPIRUN") : "mpirun";
  bool is_worker = false;
  int i = 0;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help") {
      launch_usage(stdout);
      return 0;
    }
    if (a == "--worker") {
      is_worker = true;
    } else if ((a == "-n" || a == "--nproc") && i + 1 < argc) {
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end || v < 1 || v > 65536) {
        std::fprintf(stderr, "spora launch: -n wants a rank count, got '%s'\n", argv[i]);
        return 2;
      }
      n = static_cast<int>(v);
    } else if (a == "--hosts" && i + 1 < argc) {
      hosts = argv[++i];
    } else if (a == "--mpirun" && i + 1 < argc) {
      mpirun = argv[++i];
    } else {
      std::fprintf(stderr, "spora launch: unknown option '%s'\n\n", a.c_str());
      launch_usage(stderr);
      return 2;
    }
  }
  if (i >= argc) {
    std::fprintf(stderr, "spora launch: no program given (write it after --)\n\n");
    launch_usage(stderr);
    return 2;
  }
  if (is_worker) return worker(argv + i);
  if (n < 1) {
    std::fprintf(stderr, "spora launch: give the number of ranks with -n N\n");
    return 2;
  }
  char dir_template[] = "/tmp/spora-launch-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (!dir) {
    std::fprintf(stderr, "spora launch: cannot make a status directory: %s\n", std::strerror(errno));
    return 1;
  }
  std::vector<std::string> args = {mpirun, "-np", std::to_string(n)};
  if (!hosts.empty()) {
    args.push_back("--host");
    args.push_back(hosts);
  } else {
    args.push_back("--oversubscribe");  // one host: more ranks than cores is the user's call
  }
  // Open MPI binds each rank to one core when it starts 2 or fewer (to a
  // socket above): a rank's compute threads (SPORA_NUM_THREADS = cores /
  // ranks) and its collective thread then share that core. Unbound, they
  // spread over the host's cores.
  args.push_back("--bind-to");
  args.push_back("none");
  setenv("SPORA_LAUNCH_DIR", dir, 1);
  // The job's store (runtime/tcp_store.h), served by rank 0: on the first
  // host, on a port free now, unless the caller chose.
  if (!std::getenv("MASTER_ADDR")) {
    const std::string first = hosts.empty() ? "127.0.0.1" : hosts.substr(0, hosts.find_first_of(":,"));
    setenv("MASTER_ADDR", first.c_str(), 1);
  }
  if (!std::getenv("MASTER_PORT")) setenv("MASTER_PORT", std::to_string(free_port()).c_str(), 1);
  // Open MPI's grace between SIGTERM and SIGKILL when it stops a job: long
  // enough for each worker to name the rank that was lost.
  setenv("OMPI_MCA_odls_base_sigkill_timeout", "5", 0);
  // Exported to every rank (other hosts too): what the program needs to find
  // spora, its plugins and Python.
  for (const char* var : {"SPORA_LAUNCH_DIR", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH", "SPORA_PLUGIN_PATH",
                          "SPORA_LOG_LEVEL", "SPORA_COMM_TIMEOUT_MS", "SPORA_STORE_TIMEOUT_MS", "PATH",
                          "LD_LIBRARY_PATH", "VIRTUAL_ENV"}) {
    if (!std::getenv(var)) continue;
    args.push_back("-x");
    args.push_back(var);
  }
  args.push_back(self_exe());
  args.push_back("launch");
  args.push_back("--worker");
  args.push_back("--");
  for (int k = i; k < argc; ++k) args.push_back(argv[k]);
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "spora launch: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (pid == 0) {
    execvp(cargs[0], cargs.data());
    std::fprintf(stderr,
                 "spora launch: cannot run '%s': %s (install Open MPI: apt install openmpi-bin, or pass --mpirun "
                 "PATH)\n",
                 cargs[0], std::strerror(errno));
    _exit(127);
  }
  g_mpirun = pid;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, forward);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const Failure f = first_failure(dir, true);
  if (f.rank >= 0) {
    std::fprintf(stderr, "spora launch: rank %d failed first: it %s; the job was stopped\n", f.rank, f.how.c_str());
    return f.code;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::fprintf(stderr, "spora launch: mpirun ended with status %d before any rank reported a failure\n", code);
  return code ? code : 1;
}

}  // namespace spora::cli
