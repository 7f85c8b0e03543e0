// The conformance kit's child processes (sdk/conformance/src/isolate.cpp):
// a crash in the child is named by its signal even when the host has its
// own handler for it, as a crash reporter or AddressSanitizer installs one
// (under ASan the inherited handler turned "killed by signal 11" into
// "exit status 1").
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "isolate.h"

namespace {

using spora::conformance::Channel;
using spora::conformance::run_child;

extern "C" void exit_quietly(int) { _exit(1); }

TEST(Isolate, ACrashIsNamedBySignalDespiteTheHostsHandler) {
  struct sigaction sa {}, old_segv {}, old_fpe {};
  sa.sa_handler = exit_quietly;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGSEGV, &sa, &old_segv), 0);
  ASSERT_EQ(sigaction(SIGFPE, &sa, &old_fpe), 0);
  const auto segv = run_child([](Channel&) { raise(SIGSEGV); }, 30);
  const auto fpe = run_child([](Channel&) { raise(SIGFPE); }, 30);
  sigaction(SIGSEGV, &old_segv, nullptr);
  sigaction(SIGFPE, &old_fpe, nullptr);
  EXPECT_FALSE(segv.finished);
  EXPECT_NE(segv.death.find("killed by signal 11"), std::string::npos) << segv.death;
  EXPECT_NE(fpe.death.find("killed by signal 8"), std::string::npos) << fpe.death;
  // The host's handler is its own again.
  struct sigaction now {};
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, old_segv.sa_handler);
}

TEST(Isolate, ABodyThatReturnsFinishes) {
  const auto out = run_child([](Channel&) {}, 30);
  EXPECT_TRUE(out.finished) << out.death;
}

}  // namespace
