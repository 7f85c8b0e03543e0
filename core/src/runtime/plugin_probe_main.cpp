// spora-plugin-probe: runs one candidate plugin's constructors (dlopen),
// spora_plugin_probe_v1 and spora_plugin_entry_v1 in a process of its own,
// so that a plugin that crashes, aborts, exits or hangs there takes only
// this process down (see plugin_sandbox.h, which starts it).
//
//   spora-plugin-probe <plugin file> <parent pid>
//
// Reports on file descriptor 3, one line each, written before the step it
// names, so the parent knows where a death happened:
//   stage constructor | stage probe | stage entry
//   dlopen-failed <dlerror text>          (the host will report it itself)
//   probe <score> <reason>
//   entry-error <message> | entry <kind> <abi major>.<abi minor> <name>
//   done
// and exits 0 after `done`, without running the plugin's destructors: only
// the handshake is judged here.
#include <dlfcn.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "runtime/host_services.h"

namespace {

constexpr int kReportFd = 3;

// One line, with control characters (a reason's newlines) made spaces so a
// line stays one record.
void report(std::string line) {
  for (char& c : line)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  line += '\n';
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = write(kReportFd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(120);  // the parent is gone: nobody to tell
    p += n;
    left -= static_cast<size_t>(n);
  }
}

[[noreturn]] void done() {
  report("done");
  _exit(0);
}

}  // namespace

// In a SPORA_SANITIZE=address build (no effect elsewhere): the probe must
// die the way the plugin made it die. ASan's own SIGSEGV/SIGBUS/SIGFPE
// handlers would turn "killed by SIGSEGV" into "exited with status 1", and
// its leak check at exit() an exit status into 23 -- the verdict would
// name the sanitizer, not the plugin.
extern "C" __attribute__((visibility("default"), used)) const char* __asan_default_options() {
  return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:detect_leaks=0";
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  // A parent killed while it waits (Ctrl-C during discovery) must not leave
  // a hanging plugin behind: die with it. The check after prctl closes the
  // race with a parent that died before it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (std::to_string(getppid()) != argv[2]) return 3;

  report("stage constructor");
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    report(std::string("dlopen-failed ") + (e ? e : "unknown"));
    done();
  }
  if (auto probe = reinterpret_cast<spora_plugin_probe_fn>(dlsym(lib, SPORA_PLUGIN_PROBE_SYMBOL))) {
    spora_probe_result_t r{};
    r.struct_size = sizeof(r);
    r.score = 1;
    report("stage probe");
    probe(&r);
    r.reason[sizeof(r.reason) - 1] = '\0';
    report("probe " + std::to_string(r.score) + " " + r.reason);
    if (r.score <= 0) done();  // the host never enters a plugin that scored 0
  }
  auto entry = reinterpret_cast<spora_plugin_error_t* (*)(const spora_host_t*, spora_plugin_info_t*)>(
      dlsym(lib, SPORA_PLUGIN_ENTRY_SYMBOL));
  if (!entry) done();  // the host says why (no entry, other ABI major)
  spora_plugin_info_t info{};
  info.struct_size = sizeof(info);
  report("stage entry");
  if (spora_plugin_error_t* err = entry(spora::host_description(), &info)) {
    report(std::string("entry-error ") + (err->message ? err->message : "(no message)"));
    done();
  }
  report("entry " + std::to_string(info.kind) + " " + std::to_string(info.abi_major) + "." +
         std::to_string(info.abi_minor) + " " + (info.name ? info.name : ""));
  done();
}
